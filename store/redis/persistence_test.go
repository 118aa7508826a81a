package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// configHandler answers CONFIG GET for the parameters in values (as a real
// server does, a map of one entry) and an error for anything else.
func configHandler(values map[string]string) server.Cmd {
	return func(p *server.Peer, cmd string, args []string) {
		v, ok := "", false
		if len(args) == 2 && strings.EqualFold(args[0], "GET") {
			v, ok = values[args[1]]
		}
		if !ok {
			p.WriteError("ERR unsupported in this test")
			return
		}
		p.WriteMapLen(1)
		p.WriteBulk(args[1])
		p.WriteBulk(v)
	}
}

func TestPersistence(t *testing.T) {
	cases := []struct {
		name    string
		config  map[string]string // nil: CONFIG is not available
		warn    string            // substring of the warning, "" for none
		wantErr error
	}{
		{"nothing", map[string]string{"appendonly": "no", "save": ""}, "turn on appendonly", redis.ErrNoPersistence},
		{"aof", map[string]string{"appendonly": "yes", "save": ""}, "", nil},
		{"rdb", map[string]string{"appendonly": "no", "save": "3600 1 300 100"}, "", nil},
		{"both", map[string]string{"appendonly": "yes", "save": "3600 1"}, "", nil},
		{"save unreadable", map[string]string{"appendonly": "no"}, "could not read appendonly and save", nil},
		{"no CONFIG", nil, "could not read appendonly and save", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mr, client := newMini(t)
			if c.config != nil {
				require.NoError(t, mr.Server().Register("CONFIG", configHandler(c.config)))
			}
			var logs logBuffer
			s := redis.MustNew(t, client, redis.WithLogger(logs.logger()), redis.WithEvictionCheck(false))
			ctx := context.Background()

			err := s.CheckPersistence(ctx)
			switch {
			case c.wantErr != nil:
				require.ErrorIs(t, err, c.wantErr)
				assert.Contains(t, err.Error(), mr.Addr(), "names the node")
			case c.warn != "":
				require.Error(t, err)
				assert.NotErrorIs(t, err, redis.ErrNoPersistence)
				assert.Contains(t, err.Error(), "redis: check persistence: CONFIG GET")
			default:
				require.NoError(t, err)
			}
			assert.Empty(t, logs.String(), "CheckPersistence logs nothing")

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

func TestPersistenceCheckOff(t *testing.T) {
	mr, client := newMini(t)
	require.NoError(t, mr.Server().Register("CONFIG", configHandler(map[string]string{"appendonly": "no", "save": ""})))
	var logs logBuffer
	s := redis.MustNew(t, client, redis.WithLogger(logs.logger()), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
	_, err := s.Claim(context.Background(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Empty(t, logs.String())
	// On demand it still reports.
	assert.ErrorIs(t, s.CheckPersistence(context.Background()), redis.ErrNoPersistence)
}

func TestPersistenceArguments(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, client := newMini(t)
	assert.ErrorIs(t, redis.MustNew(t, client).CheckPersistence(ctx), context.Canceled)
}

// TestPersistenceReal starts real servers with and without persistence,
// checks what CheckPersistence says of each, then restarts each after a
// Claim and a Complete to show what the check is about: the server without
// persistence comes back without the records (a retry would run again), the
// others keep them.
func TestPersistenceReal(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		persist bool
	}{
		{"none", nil, false},
		{"aof", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
		{"rdb", []string{"--save", "3600 1"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := testredis.Start(t, c.args...)
			client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: 3})
			t.Cleanup(func() { client.Close() })
			var logs logBuffer
			s := redis.MustNew(t, client, redis.WithLogger(logs.logger()))
			ctx := context.Background()

			err := s.CheckPersistence(ctx)
			if c.persist {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, redis.ErrNoPersistence)
				assert.Contains(t, err.Error(), srv.Addr)
			}

			tok := store.NewToken()
			cl, err := s.Claim(ctx, "done", "fp", tok, time.Minute)
			require.NoError(t, err)
			require.Equal(t, store.Acquired, cl.Outcome)
			require.NoError(t, s.Complete(ctx, "done", tok, []byte("paid"), time.Hour))
			if c.persist {
				assert.Empty(t, logs.String())
			} else {
				assert.Contains(t, logs.String(), "keeps no data across a restart")
			}

			if c.name == "rdb" {
				// An RDB file holds what the last snapshot saw: take one, as a
				// save point would.
				require.NoError(t, client.Save(ctx).Err())
			}
			srv.Restart()

			cl, err = s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
			require.NoError(t, err)
			if c.persist {
				assert.Equal(t, store.Completed, cl.Outcome, "the completed record survived the restart")
				assert.Equal(t, "paid", string(cl.Record.Response))
			} else {
				assert.Equal(t, store.Acquired, cl.Outcome, "without persistence the restart forgot the record: a retry runs again")
			}
		})
	}
}

// TestPersistenceRealCluster checks every master of the shared Cluster: the
// error names exactly the masters whose own settings keep nothing.
func TestPersistenceRealCluster(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	var (
		mu   sync.Mutex
		want []string
	)
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		aof := n.ConfigGet(ctx, "appendonly").Val()["appendonly"]
		save := n.ConfigGet(ctx, "save").Val()["save"]
		if aof != "yes" && save == "" {
			mu.Lock()
			want = append(want, n.Options().Addr)
			mu.Unlock()
		}
		return nil
	}))
	sort.Strings(want)
	err := redis.MustNew(t, c).CheckPersistence(ctx)
	if len(want) == 0 {
		require.NoError(t, err)
		return
	}
	require.True(t, errors.Is(err, redis.ErrNoPersistence), "%v", err)
	assert.Contains(t, err.Error(), strings.Join(want, ", "))
}

// TestPersistenceCheckOnFirstUseOnly: the persistence check runs its two
// CONFIG GETs on the first call and never again, counted by the server
// itself (INFO commandstats) on a private redis-server.
func TestPersistenceCheckOnFirstUseOnly(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client()
	s := redis.MustNew(t, c, redis.WithEvictionCheck(false), redis.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	configCalls := func() string {
		info := c.Info(ctx, "commandstats").Val()
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_config|get:") {
				return strings.SplitN(strings.TrimPrefix(line, "cmdstat_config|get:"), ",", 2)[0]
			}
		}
		return "calls=0"
	}
	require.Equal(t, "calls=0", configCalls())
	for i := range 5 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
		assert.Equal(t, "calls=2", configCalls(), "after call %d", i+1)
	}
}
