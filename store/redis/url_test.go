package redis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/storesmoke"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

func TestOpenURL(t *testing.T) {
	mr, _ := newMini(t)
	cases := map[string]func(t *testing.T) string{
		"miniredis": func(t *testing.T) string { return "redis://" + mr.Addr() + "/0?eviction_check=false&dial_timeout=2s" },
		"real": func(t *testing.T) string {
			return "redis://" + testenv.RedisAddr(t) + "/?pool_size=4"
		},
		"cluster": func(t *testing.T) string {
			return "redis+cluster://" + strings.Join(testenv.RedisClusterAddrs(t), ",") + "/"
		},
	}
	for name, url := range cases {
		t.Run(name, func(t *testing.T) {
			prefix := "idemkit-url-test:" + string(store.NewToken()) + ":"
			st, err := store.Open(t.Context(), url(t)+sep(url(t))+"prefix="+prefix)
			require.NoError(t, err)
			_, ok := st.(*redis.Store)
			require.True(t, ok, "%T", st)
			require.NoError(t, store.Migrate(t.Context(), st), "no Migrator: nothing to do")
			storesmoke.Run(t, st)
			require.NoError(t, store.Close(st))
			// The Store owned its client: it is closed now.
			_, err = st.Get(context.Background(), "any")
			require.ErrorContains(t, err, "closed")
		})
	}
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// The prefix parameter really is the key prefix: the records are found
// under it with a client of the caller's own.
func TestOpenURLPrefix(t *testing.T) {
	mr, _ := newMini(t)
	st, err := store.Open(t.Context(), "redis://"+mr.Addr()+"?prefix=app1:&eviction_check=false")
	require.NoError(t, err)
	t.Cleanup(func() { store.Close(st) })
	_, err = st.Claim(t.Context(), "k", "", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"app1:k"}, mr.Keys())
}

// coalesce=true turns WithCoalescing on; without it the Store sends every
// call alone.
func TestOpenURLCoalesce(t *testing.T) {
	mr, _ := newMini(t)
	for q, want := range map[string]bool{"coalesce=true": true, "coalesce=false": false, "": false} {
		st, err := store.Open(t.Context(), "redis://"+mr.Addr()+"?eviction_check=false&persistence_check=false&"+q)
		require.NoError(t, err, q)
		assert.Equal(t, want, redis.Coalescing(st.(*redis.Store)), "%q: coalescing", q)
		require.NoError(t, store.Close(st))
	}
}

func TestOpenURLRejects(t *testing.T) {
	mr, _ := newMini(t)
	for _, tc := range []struct{ url, want string }{
		{"redis://" + mr.Addr() + "?prefx=a", "prefx"},
		{"redis://" + mr.Addr() + "?eviction_check=maybe", "not true or false"},
		{"redis://" + mr.Addr() + "?coalesce=often", "not true or false"},
		{"redis://" + mr.Addr() + "?persistence_check=maybe", "not true or false"},
		{"redis://" + mr.Addr() + "?replicas=-1", "WithReplicas"},
		{"redis://" + mr.Addr() + "?replicas=1&replicas_timeout=0s", "WithReplicas"},
		{"redis://" + mr.Addr() + "?replicas=1&replicas_timeout=10s", "ReadTimeout"},
		{"redis://" + mr.Addr() + "/notadb", "invalid database"},
		{"redis+cluster://", "seed nodes"},
		{"redis+cluster://" + mr.Addr() + "/3", "seed nodes"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, err := store.Open(t.Context(), tc.url)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, st)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// A server that never answers makes Open return when its context ends.
func TestOpenURLUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() }) // accepts nothing: PING hangs
	for _, scheme := range []string{"redis", "redis+cluster"} {
		t.Run(scheme, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			st, err := store.Open(ctx, scheme+"://:secret@"+ln.Addr().String())
			require.Error(t, err)
			// The client reports the deadline it set from ctx as its own
			// "i/o timeout", sometimes before ctx.Err() is set.
			assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"), err.Error())
			assert.Nil(t, st)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

// replicas=1 in the URL makes claims wait for a replica: with the replica
// running a claim succeeds, with it stopped the claim fails ErrNotReplicated.
func TestOpenURLReplicas(t *testing.T) {
	master := testredis.Start(t)
	replica := master.StartReplica(t)
	st, err := store.Open(t.Context(), "redis://"+master.Addr+"?replicas=1&replicas_timeout=100ms&eviction_check=false&persistence_check=false")
	require.NoError(t, err)
	t.Cleanup(func() { store.Close(st) })
	cl, err := st.Claim(t.Context(), "a", "", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, cl.Outcome)
	replica.Pause()
	defer replica.Resume()
	_, err = st.Claim(t.Context(), "b", "", store.NewToken(), time.Minute)
	require.ErrorIs(t, err, redis.ErrNotReplicated)
}
