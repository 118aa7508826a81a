package postgres

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract,
// one call a statement and with coalescing.
func TestLinearizable(t *testing.T) {
	pool := testPool(t)
	for name, opts := range map[string][]Option{"Plain": nil, "Coalesced": {WithCoalescing(true)}} {
		t.Run(name, func(t *testing.T) {
			linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newTestStore(t, pool, opts...) }})
		})
	}
}
