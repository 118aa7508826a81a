package memory_test

import (
	"testing"

	"github.com/idemkit/idemkit/store/memory"
)

// newStore is memory.New for tests: a construction error fails tb at once,
// and the sweep is stopped when tb ends.
func newStore(tb testing.TB, opts ...memory.Option) *memory.Store {
	tb.Helper()
	s, err := memory.New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
