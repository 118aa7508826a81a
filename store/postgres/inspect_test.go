package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestListUsesExpiryIndex shows that List's statement, for every state and
// with a cursor, can be served by the index on expires_at: an index
// range bounded by the cursor, read in expires_at order (seq and bitmap
// scans are turned off so that a small table does not hide a statement the
// index cannot serve; with a Prefix the planner may pick the primary key's
// range instead, also an index).
func TestListUsesExpiryIndex(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"); err != nil {
		t.Fatal(err)
	}
	after := store.Position{ExpiresAt: time.Now(), Key: "k"}
	for st := store.State(0); st <= store.StateExpired; st++ {
		q, args := s.listQuery(store.ListOptions{State: st}, after, 10)
		rows, err := tx.Query(t.Context(), "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		t.Logf("state %v: %s", st, p)
		if !strings.Contains(p, "Index Scan using") || !strings.Contains(p, "_expires_at_idx") || !strings.Contains(p, "Index Cond: ") {
			t.Errorf("state %v: plan %q is not an index range on expires_at", st, p)
		}
	}
}
