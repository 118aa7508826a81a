package mysql

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestListUsesExpiryIndex shows that List's statement, for every state and
// with a cursor, is served by the index on expires_at in List's order:
// EXPLAIN names the index and no filesort.
func TestListUsesExpiryIndex(t *testing.T) {
	db := testDB(t)
	s := newTestStore(t, db)
	after := store.Position{ExpiresAt: time.Now(), Key: "k"}
	for st := store.State(0); st <= store.StateExpired; st++ {
		q, args := s.listQuery(store.ListOptions{State: st}, after, 10)
		rows, err := db.QueryContext(t.Context(), "EXPLAIN FORMAT=TRADITIONAL "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var plan []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					plan = append(plan, c+"="+string(b))
				}
			}
		}
		rows.Close()
		p := strings.Join(plan, " ")
		t.Logf("state %v: %s", st, p)
		if !strings.Contains(p, "key="+strings.Trim(s.table, "`")+indexSuffix) || strings.Contains(p, "filesort") {
			t.Errorf("state %v: plan %q does not read the expires_at index in order", st, p)
		}
	}
}
