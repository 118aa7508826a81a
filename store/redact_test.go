package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store"
)

// errLeak is what the careless driver below wraps.
var errLeak = errors.New("driver failed")

// A driver that echoes everything it was given in its errors, as the worst
// driver would: the raw URL, its password, its query.
func init() {
	store.Register("leaky", func(_ context.Context, u *url.URL) (store.Store, error) {
		pw, _ := u.User.Password()
		return nil, fmt.Errorf("cannot connect to %s (password %s, query %s, sslpassword %s): %w",
			u.String(), pw, u.RawQuery, u.Query().Get("sslpassword"), errLeak)
	})
}

func TestOpenRedactsEveryShape(t *testing.T) {
	for name, raw := range secrettest.Shapes("leaky", "user", "127.0.0.1:1", "db") {
		t.Run(name, func(t *testing.T) {
			_, err := store.Open(t.Context(), raw)
			secrettest.Check(t, err)
			if !strings.HasPrefix(err.Error(), "store: open") {
				t.Errorf("message %q does not say where it failed", err)
			}
		})
	}
	// The driver's error is still matched through the redaction.
	_, err := store.Open(t.Context(), "leaky://user:"+secrettest.Password+"@h/db")
	if !errors.Is(err, errLeak) {
		t.Errorf("redacted error %v does not match the driver's", err)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("redacted error unwraps to %v, which holds the password", errors.Unwrap(err))
	}
	// Malformed ones are ErrInvalid and open nothing.
	for _, name := range secrettest.Malformed {
		if _, err := store.Open(t.Context(), secrettest.Shapes("leaky", "user", "h:1", "db")[name]); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	u, _ := url.Parse("postgres://u:" + secrettest.A + "@h/db?sslpassword=" + secrettest.B + "&sslmode=disable&Token=" + secrettest.B)
	got := store.RedactURL(u)
	for _, want := range []string{"u:xxxxx@h", "sslpassword=xxxxx", "sslmode=disable", "Token=xxxxx"} {
		if !strings.Contains(got, want) {
			t.Errorf("RedactURL = %s, want it to contain %s", got, want)
		}
	}
	if len(store.Secrets(u)) != 3 {
		t.Errorf("Secrets = %q, want 3", store.Secrets(u))
	}
	if err := store.RedactError(errLeak, secrettest.A); err != errLeak {
		t.Errorf("an error without the secret is changed: %v", err)
	}
	if store.RedactError(nil, secrettest.A) != nil {
		t.Error("RedactError(nil) is not nil")
	}
}
