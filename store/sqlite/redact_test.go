package sqlite_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
)

// TestOpenShowsNoPassword: a sqlite URL has no use for a password, and its
// refusal shows none of it, whatever shape it takes.
func TestOpenShowsNoPassword(t *testing.T) {
	secrettest.CheckOpen(t, secrettest.Shapes("sqlite", "user", "localhost", "x.db"), "", 5*time.Second)
}
