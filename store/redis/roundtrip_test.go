package redis_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// tripCounter is a go-redis hook counting round trips: one per command the
// client processes, one per pipeline.
type tripCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	names []string
}

func (h *tripCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *tripCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// trips runs f and returns how many round trips it made, and their commands.
func (h *tripCounter) trips(t *testing.T, f func()) (int64, []string) {
	t.Helper()
	h.mu.Lock()
	h.names = nil
	h.mu.Unlock()
	before := h.n.Load()
	f()
	n := h.n.Load() - before
	h.mu.Lock()
	defer h.mu.Unlock()
	return n, h.names
}

func TestRoundTrips(t *testing.T) {
	backends := map[string]func(t *testing.T) goredis.UniversalClient{
		"miniredis": func(t *testing.T) goredis.UniversalClient { _, c := newMini(t); return c },
		"redis":     func(t *testing.T) goredis.UniversalClient { return realClient(t) },
		"cluster":   func(t *testing.T) goredis.UniversalClient { return clusterClient(t) },
	}
	for name, newClient := range backends {
		t.Run(name, func(t *testing.T) {
			c := newClient(t)
			h := &tripCounter{}
			c.AddHook(h)
			ctx := context.Background()
			s := redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)), redis.WithEvictionCheck(false))

			// Load the scripts (EVALSHA, NOSCRIPT, EVAL) before counting.
			warm := store.NewToken()
			_, err := s.Claim(ctx, "warm", "fp", warm, time.Minute)
			require.NoError(t, err)
			_, err = s.Claim(ctx, "warm", "fp", warm, time.Minute)
			require.NoError(t, err)
			require.NoError(t, s.Complete(ctx, "warm", warm, []byte("r"), time.Minute))
			require.NoError(t, s.Release(ctx, "warm", warm))
			_, err = s.Get(ctx, "warm") // and the connection MULTI/EXEC takes
			require.NoError(t, err)

			t1, t2 := store.NewToken(), store.NewToken()
			steps := []struct {
				name string
				want int64
				call func() error
			}{
				{"Claim of a new key", 1, func() error { return wantOutcome(s.Claim(ctx, "k", "fp", t1, time.Minute))(store.Acquired) }},
				// A record in progress may be live or lapsed (kept for
				// LapsedKept): the claim script judges it on the server's
				// clock, after the SET that found it.
				{"Claim held by another token", 2, func() error { return wantOutcome(s.Claim(ctx, "k", "fp", t2, time.Minute))(store.InProgress) }},
				{"Claim with another fingerprint", 2, func() error { return wantOutcome(s.Claim(ctx, "k", "fp2", t2, time.Minute))(store.Mismatch) }},
				{"re-entrant Claim (renewal)", 2, func() error { return wantOutcome(s.Claim(ctx, "k", "fp", t1, time.Minute))(store.Acquired) }},
				{"Get", 1, func() error { _, err := s.Get(ctx, "k"); return err }},
				{"Complete", 1, func() error { return s.Complete(ctx, "k", t1, []byte("resp"), time.Minute) }},
				{"Claim replay", 1, func() error { return wantOutcome(s.Claim(ctx, "k", "fp", t2, time.Minute))(store.Completed) }},
				{"retried Complete", 1, func() error { return s.Complete(ctx, "k", t1, []byte("resp"), time.Minute) }},
				{"Claim of another new key", 1, func() error { return wantOutcome(s.Claim(ctx, "k2", "fp", t2, time.Minute))(store.Acquired) }},
				{"Release", 1, func() error { return s.Release(ctx, "k2", t2) }},
			}
			for _, st := range steps {
				var err error
				n, names := h.trips(t, func() { err = st.call() })
				require.NoError(t, err, st.name)
				assert.Equal(t, st.want, n, "%s: round trips (commands %v)", st.name, names)
			}
		})
	}
}

func wantOutcome(c store.Claim, err error) func(store.Outcome) error {
	return func(want store.Outcome) error {
		if err != nil {
			return err
		}
		if c.Outcome != want {
			return &outcomeError{got: c.Outcome, want: want}
		}
		return nil
	}
}

type outcomeError struct{ got, want store.Outcome }

func (e *outcomeError) Error() string {
	return "outcome " + e.got.String() + ", want " + e.want.String()
}

// TestEvictionCheckOnFirstUseOnly: the maxmemory-policy check costs one
// CONFIG GET on the first call and nothing after.
func TestEvictionCheckOnFirstUseOnly(t *testing.T) {
	c := realClient(t)
	h := &tripCounter{}
	c.AddHook(h)
	s := redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)), redis.WithPersistenceCheck(false))
	ctx := context.Background()
	// Get sends MULTI/EXEC, which go-redis first sends on a connection of
	// its own: dial it before counting.
	_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error { p.Ping(ctx); return nil })
	require.NoError(t, err)
	n, names := h.trips(t, func() {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	})
	assert.Equal(t, int64(2), n, "first call: %v", names)
	assert.Contains(t, names, "config")
	n, names = h.trips(t, func() {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	})
	assert.Equal(t, int64(1), n, "second call: %v", names)
}
