package dynamodb_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract,
// on the local server: once with the GetItem fallback (dynalite), once with
// the refused write's item handed back as DynamoDB does.
func TestLinearizable(t *testing.T) {
	c := localClient(t)
	t.Run("GetItemFallback", func(t *testing.T) {
		linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store { return newTable(t, c) }})
	})
	t.Run("ReturnedItem", func(t *testing.T) {
		linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store {
			w := wrap(c)
			w.withOld = true
			return newTable(t, w)
		}})
	})
}
