package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestListUsesExpiryIndex shows that List's statement, for every state and
// with a cursor, is served by the index on expires_at in the order it
// returns (no temporary B-tree for ORDER BY expires_at alone).
func TestListUsesExpiryIndex(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := store.Position{ExpiresAt: time.Now(), Key: "k"}
	for st := store.State(0); st <= store.StateExpired; st++ {
		o := store.ListOptions{State: st, Prefix: "p", ExpiresBefore: time.Now().Add(time.Hour)}
		q, args := s.listQuery(o, after, 10, micros(time.Now()))
		rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		t.Logf("state %v: %s", st, p)
		if !strings.Contains(p, "USING INDEX "+DefaultTable+indexSuffix) {
			t.Errorf("state %v: plan %q does not use the expires_at index", st, p)
		}
		if strings.Contains(p, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("state %v: plan %q sorts every row it reads", st, p)
		}
		if !strings.Contains(p, "expires_at>?") && !strings.Contains(p, "expires_at<?") {
			t.Errorf("state %v: plan %q scans the whole index instead of a range", st, p)
		}
	}
}
