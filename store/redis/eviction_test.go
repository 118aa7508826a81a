package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// logBuffer is a slog.Logger writing text into a buffer tests can read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func TestEvictionPolicy(t *testing.T) {
	cases := []struct {
		policy  string // "" means CONFIG is not available
		warn    string // substring of the warning, "" for none
		wantErr error
	}{
		{"noeviction", "", nil},
		{"allkeys-lru", "set maxmemory-policy to noeviction", redis.ErrEvictionPolicy},
		{"volatile-ttl", "set maxmemory-policy to noeviction", redis.ErrEvictionPolicy},
		{"", "could not read maxmemory-policy", nil},
	}
	for _, c := range cases {
		t.Run("policy="+c.policy, func(t *testing.T) {
			mr, client := newMini(t)
			if c.policy != "" {
				require.NoError(t, mr.Server().Register("CONFIG", func(p *server.Peer, cmd string, args []string) {
					if len(args) != 2 || !strings.EqualFold(args[0], "GET") || args[1] != "maxmemory-policy" {
						p.WriteError("ERR unsupported in this test")
						return
					}
					p.WriteMapLen(1)
					p.WriteBulk("maxmemory-policy")
					p.WriteBulk(c.policy)
				}))
			}
			var logs logBuffer
			s := redis.MustNew(t, client, redis.WithLogger(logs.logger()), redis.WithPersistenceCheck(false))
			ctx := context.Background()

			err := s.CheckEviction(ctx)
			switch {
			case c.wantErr != nil:
				require.ErrorIs(t, err, c.wantErr)
				assert.Contains(t, err.Error(), c.policy)
			case c.policy == "":
				require.Error(t, err)
				assert.NotErrorIs(t, err, redis.ErrEvictionPolicy)
			default:
				require.NoError(t, err)
			}
			assert.Empty(t, logs.String(), "CheckEviction logs nothing")

			// The first call checks and logs once; the calls themselves work.
			for range 3 {
				_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
			}
			out := logs.String()
			if c.warn == "" {
				assert.Empty(t, out)
			} else {
				assert.Contains(t, out, c.warn)
				assert.Contains(t, out, "level=WARN")
				assert.Equal(t, 1, strings.Count(out, "\n"), "logged once: %s", out)
			}
		})
	}
}

func TestEvictionCheckOff(t *testing.T) {
	_, client := newMini(t) // no CONFIG: the check would warn
	var logs logBuffer
	s := redis.MustNew(t, client, redis.WithLogger(logs.logger()), redis.WithEvictionCheck(false),
		redis.WithPersistenceCheck(false))
	_, err := s.Claim(context.Background(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Empty(t, logs.String())
}

func TestEvictionPolicyReal(t *testing.T) {
	ctx := context.Background()
	t.Run("redis", func(t *testing.T) {
		c := realClient(t)
		want := c.ConfigGet(ctx, "maxmemory-policy").Val()["maxmemory-policy"]
		err := redis.MustNew(t, c).CheckEviction(ctx)
		if want == "noeviction" {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, redis.ErrEvictionPolicy)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := clusterClient(t)
		err := redis.MustNew(t, c).CheckEviction(ctx)
		if err != nil {
			assert.ErrorIs(t, err, redis.ErrEvictionPolicy, "every master answers CONFIG GET")
		}
	})
}

// TestSetGetFallback: after the server rejects SET ... NX GET once, the store
// claims with its script and never sends SET ... NX GET again, and says so
// once in the log.
func TestSetGetFallback(t *testing.T) {
	_, c := newMini(t)
	h := &rejectSetGet{}
	c.AddHook(h)
	counter := &tripCounter{}
	c.AddHook(counter)
	var logs logBuffer
	s := redis.MustNew(t, c, redis.WithLogger(logs.logger()), redis.WithEvictionCheck(false))
	ctx := context.Background()
	for i := range 5 {
		key := "k" + string(rune('a'+i))
		tok := store.NewToken()
		cl, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, cl.Outcome)
		cl, err = s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.InProgress, cl.Outcome)
		require.Equal(t, tok, cl.Record.Token)
	}
	assert.Equal(t, int64(1), h.rejected.Load(), "SET NX GET attempts")
	n, names := counter.trips(t, func() {
		_, err := s.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
	})
	assert.Equal(t, int64(1), n, "a new key with the fallback still costs one round trip: %v", names)
	assert.Equal(t, []string{"evalsha"}, names)
	assert.Equal(t, 1, strings.Count(logs.String(), "NX GET"), logs.String())
}
