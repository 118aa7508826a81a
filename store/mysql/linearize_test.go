package mysql

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract.
func TestLinearizable(t *testing.T) {
	db := testDB(t)
	linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newTestStore(t, db) }})
}
