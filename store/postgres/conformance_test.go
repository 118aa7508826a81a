package postgres

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// TestConformance runs the full storetest suite, each subtest on its own
// table, on the server's clock.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return withEffects(t, pool, storetest.Subject{Store: newTestStore(t, pool)})
		},
	})
}
