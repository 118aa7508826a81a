package sqlite_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store"
)

// TestOpenShowsNoPassword: a sqlite URL has no use for a password, and its
// refusal shows none of it, whatever shape it takes.
func TestOpenShowsNoPassword(t *testing.T) {
	for name, raw := range secrettest.Shapes("sqlite", "user", "localhost", "x.db") {
		t.Run(name, func(t *testing.T) {
			s, err := store.Open(t.Context(), raw)
			if err == nil {
				store.Close(s)
			}
			secrettest.Check(t, err)
		})
	}
}
