package redis_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/internal/testenv"
)

// TestOpenShowsNoPassword: whatever shape the password takes in the URL,
// and whatever fails (nothing listens, AUTH is refused), store.Open's error
// shows none of it.
func TestOpenShowsNoPassword(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		secrettest.CheckOpen(t, secrettest.Shapes("redis", "default", "127.0.0.1:1", "0"), "", 5*time.Second)
	})
	t.Run("refused", func(t *testing.T) {
		secrettest.CheckOpen(t, secrettest.Shapes("redis", "idemkit-no-such-user", testenv.RedisAddr(t), "0"), "", 5*time.Second)
	})
}
