package linearize_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// A backend runs the check beside storetest.Run, from its own tests, on a
// fresh store. No clock is needed: nothing expires during the check.
func Example() {
	testLinearizable := func(t *testing.T) { // func TestLinearizable(t *testing.T) in your _test.go file
		linearize.Run(t, linearize.Harness{
			New: func(t *testing.T) store.Store {
				s, err := memory.New()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			},
		})
	}
	_ = testLinearizable
}
