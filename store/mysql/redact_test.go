package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// TestOpenShowsNoPassword: whatever shape the password takes in the URL,
// and whatever fails (nothing listens, the login is refused), store.Open's
// error shows none of it. No shape logs in: the password is wrong for
// every user, and a password= parameter is refused before it could become
// a SET statement.
func TestOpenShowsNoPassword(t *testing.T) {
	open := func(t *testing.T, raw string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := store.Open(ctx, raw)
		if err == nil {
			store.Close(s)
		}
		return err
	}
	t.Run("unreachable", func(t *testing.T) {
		for name, raw := range secrettest.Shapes("mysql", "root", "127.0.0.1:1", "test") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw)) })
		}
	})
	t.Run("failed login", func(t *testing.T) {
		_, rest, _ := strings.Cut(testenv.MySQLDSN(t), "@tcp(")
		addr, _, _ := strings.Cut(rest, ")")
		for name, raw := range secrettest.Shapes("mysql", "root", addr, "test") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw)) })
		}
	})
}
