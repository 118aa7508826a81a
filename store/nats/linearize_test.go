package nats_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract,
// on a fresh bucket of the server at IDEMKIT_NATS_URL.
func TestLinearizable(t *testing.T) {
	nc := connect(t, natsURL(t))
	linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newStore(t, nc) }})
}
