package mysql_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/internal/testenv"
)

// TestOpenShowsNoPassword: whatever shape the password takes in the URL,
// and whatever fails (nothing listens, the login is refused), store.Open's
// error shows none of it. No shape logs in: the password is wrong for
// every user, and a password= parameter is refused before it could become
// a SET statement.
func TestOpenShowsNoPassword(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		secrettest.CheckOpen(t, secrettest.Shapes("mysql", "root", "127.0.0.1:1", "test"), "", 10*time.Second)
	})
	t.Run("failed login", func(t *testing.T) {
		_, rest, _ := strings.Cut(testenv.MySQLDSN(t), "@tcp(")
		addr, _, _ := strings.Cut(rest, ")")
		secrettest.CheckOpen(t, secrettest.Shapes("mysql", "root", addr, "test"), "", 10*time.Second)
	})
}
