package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/postgres"
)

// TestOpenShowsNoPassword: whatever shape the password takes in the URL,
// and whatever fails (nothing listens, the login is refused, a parameter is
// malformed), store.Open's error shows none of it.
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
		for name, raw := range secrettest.Shapes("postgres", "postgres", "127.0.0.1:1", "test") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw+sep(raw)+"sslmode=disable&connect_timeout=2")) })
		}
	})
	t.Run("malformed parameter", func(t *testing.T) {
		for name, raw := range secrettest.Shapes("postgres", "postgres", "127.0.0.1:1", "test") {
			t.Run(name, func(t *testing.T) {
				err := open(t, raw+sep(raw)+"connect_timeout=soon&sslmode=disable")
				secrettest.Check(t, err)
				if !errors.Is(err, store.ErrInvalid) {
					t.Errorf("%v: want ErrInvalid", err)
				}
			})
		}
	})
	t.Run("failed login", func(t *testing.T) {
		u, err := url.Parse(testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		// A role that does not exist: refused even where the server trusts
		// every password.
		for name, raw := range secrettest.Shapes("postgres", "idemkit_no_such_role", u.Host, "test") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw+sep(raw)+"sslmode=disable")) })
		}
	})
}

func sep(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.RawQuery != "" {
		return "&"
	}
	return "?"
}
