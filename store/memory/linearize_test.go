package memory_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts and retries against the contract.
func TestLinearizable(t *testing.T) {
	linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newStore(t) }})
}
