package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// quiet are the options of every store in these tests: no first-use checks.
var quiet = []redis.Option{redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false),
	redis.WithLogger(slog.New(slog.DiscardHandler))}

func newStore(t testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	t.Helper()
	return redis.MustNew(t, c, append(append([]redis.Option{}, quiet...), opts...)...)
}

// wantNotReplicated checks err is a store error wrapping ErrNotReplicated,
// never one of the store's sentinels.
func wantNotReplicated(t *testing.T, err error, op string) {
	t.Helper()
	require.ErrorIs(t, err, redis.ErrNotReplicated, op)
	assert.Contains(t, err.Error(), "redis: "+op)
	for _, s := range []error{store.ErrNotFound, store.ErrLeaseLost, store.ErrInvalid, goredis.Nil} {
		assert.False(t, errors.Is(err, s), "%s: error %v matches %v", op, err, s)
	}
}

func TestReplicasArguments(t *testing.T) {
	_, c := newMini(t)
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": miniredis.RunT(t).Addr()}})
	t.Cleanup(func() { ring.Close() })
	cases := []struct {
		name   string
		client goredis.UniversalClient
		n      int
		d      time.Duration
	}{
		{"negative n", c, -1, time.Second},
		{"zero timeout", c, 1, 0},
		{"negative timeout", c, 1, -time.Second},
		{"timeout not below ReadTimeout", c, 1, c.Options().ReadTimeout},
		{"a Ring", ring, 1, time.Second},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redis.New(tc.client, redis.WithReplicas(tc.n, tc.d))
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), "redis: new: ")
			assert.Contains(t, err.Error(), "WithReplicas")
		})
	}
	t.Run("zero is off", func(t *testing.T) {
		s := newStore(t, c, redis.WithReplicas(0, 0))
		cl, err := s.Claim(ctx, "k0", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Acquired, cl.Outcome)
	})
}

// TestReplicasStandalone runs a private master with one replica. While the
// replica runs, waiting writes succeed; once it is paused (SIGSTOP), a Claim
// that writes, a renewal (Claim and Renew) and a Complete fail with ErrNotReplicated, and the
// failed new claim is released. A store that does not wait reports those
// same calls as successes: the replica's acknowledgement, not luck, decides.
// The WAIT must run on the connection that wrote: on any other connection it
// would count the paused replica, which acknowledged everything before it
// was paused, and return at once.
func TestReplicasStandalone(t *testing.T) {
	master := testredis.Start(t)
	replica := master.StartReplica(t)
	c := goredis.NewClient(&goredis.Options{Addr: master.Addr, PoolSize: 4})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	const timeout = 150 * time.Millisecond
	s := newStore(t, c, redis.WithReplicas(1, timeout))
	plain := newStore(t, c)
	rc := replica.Client()

	held := store.NewToken()
	cl, err := s.Claim(ctx, "held", "fp", held, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, cl.Outcome)
	require.NoError(t, rc.Get(ctx, redis.DefaultPrefix+"held").Err(), "acknowledged: on the replica already")
	done := store.NewToken()
	_, err = s.Claim(ctx, "done", "fp", done, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "done", done, []byte("paid"), time.Hour))

	replica.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			replica.Resume()
		}
	})

	start := time.Now()
	_, err = s.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
	wantNotReplicated(t, err, "claim")
	assert.GreaterOrEqual(t, time.Since(start), timeout, "WAIT waited its timeout")
	assert.Contains(t, err.Error(), "0 of 1 replicas")
	_, err = plain.Get(ctx, "new")
	require.ErrorIs(t, err, store.ErrNotFound, "the unreplicated claim was released")

	_, err = s.Claim(ctx, "held", "fp", held, time.Minute)
	wantNotReplicated(t, err, "claim")
	err = s.Renew(ctx, "held", held, time.Minute)
	wantNotReplicated(t, err, "renew")
	// A Renew that writes nothing does not depend on the replicas.
	require.ErrorIs(t, s.Renew(ctx, "held", store.NewToken(), time.Minute), store.ErrLeaseLost)

	err = s.Complete(ctx, "held", held, []byte("paid"), time.Hour)
	wantNotReplicated(t, err, "complete")
	rec, err := plain.Get(ctx, "held")
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, rec.Status, "the master keeps the completion; a retried Complete waits again")
	// A retried Complete, even on another connection and even where the
	// completion script writes nothing the second time, waits for the record.
	other := goredis.NewClient(&goredis.Options{Addr: master.Addr})
	t.Cleanup(func() { other.Close() })
	err = newStore(t, other, redis.WithReplicas(1, timeout)).Complete(ctx, "held", held, []byte("paid"), time.Hour)
	wantNotReplicated(t, err, "complete")

	// Outcomes that write nothing do not depend on the replicas.
	cl, err = s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Completed, cl.Outcome)
	cl, err = s.Claim(ctx, "done", "other-fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Mismatch, cl.Outcome)
	require.NoError(t, s.Release(ctx, "done", done))

	// The control: without waiting the same calls succeed.
	tok := store.NewToken()
	cl, err = plain.Claim(ctx, "plain", "fp", tok, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, cl.Outcome)
	require.NoError(t, plain.Renew(ctx, "plain", tok, time.Minute))
	require.NoError(t, plain.Complete(ctx, "plain", tok, []byte("r"), time.Hour))

	replica.Resume()
	resumed = true
	require.NoError(t, s.Complete(ctx, "held", held, []byte("paid"), time.Hour), "the retried Complete, replica back")
	cl, err = s.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, cl.Outcome, "the released key is claimable")
	testredis.Eventually(t, 5*time.Second, "replica caught up", func() error {
		return rc.Get(ctx, redis.DefaultPrefix+"new").Err()
	})
}

// TestReplicasNoReplica: against a server with no replica every write
// fails after the timeout (WAIT 1 can never be satisfied), and a claim is
// never reported Acquired.
func TestReplicasNoReplica(t *testing.T) {
	srv := testredis.Start(t)
	s := newStore(t, srv.Client(), redis.WithReplicas(1, 50*time.Millisecond))
	ctx := context.Background()
	for i := range 3 {
		cl, err := s.Claim(ctx, fmt.Sprint("k", i), "fp", store.NewToken(), time.Minute)
		wantNotReplicated(t, err, "claim")
		assert.NotEqual(t, store.Acquired, cl.Outcome)
	}
}

// TestReplicasCluster runs waiting stores on the shared Cluster (a replica
// per master): claims and completions of keys on every master succeed, and
// each completed record is on its master's replica the moment Complete
// returns.
func TestReplicasCluster(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	s := newStore(t, c, redis.WithPrefix(prefix), redis.WithReplicas(1, time.Second))
	replicas := map[string]*goredis.Client{}
	for i := range 30 {
		key := fmt.Sprint("k", i)
		tok := store.NewToken()
		cl, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, cl.Outcome)
		require.NoError(t, s.Complete(ctx, key, tok, []byte("paid"), time.Minute))

		master, err := c.MasterForKey(ctx, prefix+key)
		require.NoError(t, err)
		rc, ok := replicas[master.Options().Addr]
		if !ok {
			rc = replicaClient(t, master)
			replicas[master.Options().Addr] = rc
		}
		v, err := rc.Get(ctx, prefix+key).Result()
		require.NoError(t, err, "key %s on the replica of %s", key, master.Options().Addr)
		assert.Contains(t, v, "paid")
	}
	assert.Len(t, replicas, 3, "the keys covered every master")
}

// replicaClient returns a READONLY client of a replica of master (per the
// master's INFO replication), closed when t ends.
func replicaClient(t *testing.T, master *goredis.Client) *goredis.Client {
	t.Helper()
	ctx := context.Background()
	info, err := master.Info(ctx, "replication").Result()
	require.NoError(t, err)
	var ip, port string
	for _, f := range fieldsOf(info, "slave0:") {
		switch f[0] {
		case "ip":
			ip = f[1]
		case "port":
			port = f[1]
		}
	}
	require.NotEmpty(t, port, "%s has a replica:\n%s", master.Options().Addr, info)
	rc := goredis.NewClient(&goredis.Options{Addr: ip + ":" + port, OnConnect: func(ctx context.Context, cn *goredis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	t.Cleanup(func() { rc.Close() })
	return rc
}

// fieldsOf splits the INFO line starting with prefix into key=value pairs.
func fieldsOf(info, prefix string) [][2]string {
	var out [][2]string
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out = append(out, [2]string{k, v})
			}
		}
	}
	return out
}
