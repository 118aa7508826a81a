package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// TestOpenShowsNoPassword: whatever shape the password takes in the URL,
// and whatever fails (nothing listens, AUTH is refused), store.Open's error
// shows none of it.
func TestOpenShowsNoPassword(t *testing.T) {
	open := func(t *testing.T, raw string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		s, err := store.Open(ctx, raw)
		if err == nil {
			store.Close(s)
		}
		return err
	}
	t.Run("unreachable", func(t *testing.T) {
		for name, raw := range secrettest.Shapes("redis", "default", "127.0.0.1:1", "0") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw)) })
		}
	})
	t.Run("refused", func(t *testing.T) {
		addr := testenv.RedisAddr(t)
		for name, raw := range secrettest.Shapes("redis", "idemkit-no-such-user", addr, "0") {
			t.Run(name, func(t *testing.T) { secrettest.Check(t, open(t, raw)) })
		}
	})
}
