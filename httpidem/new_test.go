package httpidem_test

import (
	"testing"

	"github.com/idemkit/idemkit/store/memory"
)

// mustMemory is memory.New for tests: a construction error fails tb at once.
func mustMemory(tb testing.TB, opts ...memory.Option) *memory.Store {
	tb.Helper()
	s, err := memory.New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
