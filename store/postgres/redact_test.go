package postgres_test

import (
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
	t.Run("unreachable", func(t *testing.T) {
		secrettest.CheckOpen(t, secrettest.Shapes("postgres", "postgres", "127.0.0.1:1", "test"), "sslmode=disable&connect_timeout=2", 10*time.Second)
	})
	t.Run("malformed parameter", func(t *testing.T) {
		shapes := secrettest.Shapes("postgres", "postgres", "127.0.0.1:1", "test")
		secrettest.CheckOpen(t, shapes, "connect_timeout=soon&sslmode=disable", 10*time.Second)
		for name, raw := range shapes {
			if u, err := url.Parse(raw); err == nil {
				q := u.Query()
				q.Set("connect_timeout", "soon")
				u.RawQuery = q.Encode()
				raw = u.String()
			}
			if _, err := store.Open(t.Context(), raw); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
	})
	t.Run("failed login", func(t *testing.T) {
		u, err := url.Parse(testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		// A role that does not exist: refused even where the server trusts
		// every password.
		secrettest.CheckOpen(t, secrettest.Shapes("postgres", "idemkit_no_such_role", u.Host, "test"), "sslmode=disable", 10*time.Second)
	})
}
