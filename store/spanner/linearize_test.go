package spanner

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract,
// on a fresh table of the emulator's database.
func TestLinearizable(t *testing.T) {
	linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newTestStore(t) }})
}
