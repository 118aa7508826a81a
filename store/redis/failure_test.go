package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// wantBackendError checks that err is a backend failure reported by op: an
// error, never one of the store's sentinels, never redis.Nil.
func wantBackendError(t *testing.T, err error, op string) {
	t.Helper()
	require.Error(t, err, op)
	assert.Contains(t, err.Error(), "redis: "+op)
	for _, s := range []error{store.ErrNotFound, store.ErrLeaseLost, store.ErrInvalid, goredis.Nil} {
		assert.False(t, errors.Is(err, s), "%s: error %v matches %v", op, err, s)
	}
}

// allCalls makes every Store call once and checks each fails as a backend.
func allCalls(t *testing.T, s *redis.Store) {
	t.Helper()
	ctx := context.Background()
	tok := store.NewToken()
	_, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	wantBackendError(t, err, "claim")
	wantBackendError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Minute), "complete")
	wantBackendError(t, s.Release(ctx, "k", tok), "release")
	_, err = s.Get(ctx, "k")
	wantBackendError(t, err, "get")
}

func TestServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: 1, DialTimeout: time.Second, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	allCalls(t, redis.MustNew(t, c, redis.WithLogger(slog.New(slog.DiscardHandler))))
}

func TestServerStopsMidTest(t *testing.T) {
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), MaxRetries: 1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	s := redis.MustNew(t, c, redis.WithEvictionCheck(false))
	ctx := context.Background()
	tok := store.NewToken()
	cl, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, cl.Outcome)
	mr.Close()
	allCalls(t, s)
}

// A nil client or an invalid option fails at New, not at the first call.
func TestNewRejects(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	for name, build := range map[string]func() (*redis.Store, error){
		"nil client": func() (*redis.Store, error) { return redis.New(nil) },
		"nil clock":  func() (*redis.Store, error) { return redis.New(c, redis.WithClock(nil)) },
		"nil logger": func() (*redis.Store, error) { return redis.New(c, redis.WithLogger(nil)) },
	} {
		t.Run(name, func(t *testing.T) {
			s, err := build()
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), "redis: new: ")
		})
	}
}

// newProxy starts a faultproxy in front of target, closed when t ends.
func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// TestReplyLost: the connection is cut after Redis ran a call and before
// its reply arrived. With go-redis' retries off, the claimant gets an error,
// a competitor sees the key in progress (never both acquire), and the
// claimant's own retry acquires it; a Complete whose reply is lost succeeds
// when retried. With go-redis' default retries the same loss is invisible:
// the resent command finds the claimant's own record and Claim acquires.
func TestReplyLost(t *testing.T) {
	mr, direct := newMini(t)
	p := newProxy(t, mr.Addr())
	ctx := context.Background()
	prefix := testPrefix(t, direct)
	b := redis.MustNew(t, direct, redis.WithPrefix(prefix), redis.WithEvictionCheck(false))

	t.Run("no retries", func(t *testing.T) {
		viaProxy := goredis.NewClient(&goredis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { viaProxy.Close() })
		a := redis.MustNew(t, viaProxy, redis.WithPrefix(prefix), redis.WithEvictionCheck(false))
		ta, tb := store.NewToken(), store.NewToken()

		p.LoseReplyTo([]byte(prefix + "k1"))
		_, err := a.Claim(ctx, "k1", "fp", ta, time.Minute)
		wantBackendError(t, err, "claim")

		c, err := b.Claim(ctx, "k1", "fp", tb, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.InProgress, c.Outcome, "the competitor must not acquire a key whose claim ran")
		require.Equal(t, ta, c.Record.Token)

		c, err = a.Claim(ctx, "k1", "fp", ta, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome, "the claimant's retry after a lost reply")

		p.LoseReplyTo([]byte(prefix + "k1"))
		wantBackendError(t, a.Complete(ctx, "k1", ta, []byte("done"), time.Minute), "complete")
		require.NoError(t, a.Complete(ctx, "k1", ta, []byte("done"), time.Minute), "retried Complete after a lost reply")

		c, err = b.Claim(ctx, "k1", "fp", tb, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Completed, c.Outcome)
		assert.Equal(t, []byte("done"), c.Record.Response)
	})

	t.Run("go-redis retries", func(t *testing.T) {
		viaProxy := goredis.NewClient(&goredis.Options{Addr: p.Addr(), PoolSize: 1})
		t.Cleanup(func() { viaProxy.Close() })
		dials := &dialCounter{}
		viaProxy.AddHook(dials)
		a := redis.MustNew(t, viaProxy, redis.WithPrefix(prefix), redis.WithEvictionCheck(false))
		ta, tb := store.NewToken(), store.NewToken()
		require.NoError(t, viaProxy.Ping(ctx).Err())
		require.Equal(t, int64(1), dials.n.Load())

		p.LoseReplyTo([]byte(prefix + "k2"))
		c, err := a.Claim(ctx, "k2", "fp", ta, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		require.Equal(t, int64(2), dials.n.Load(), "the reply was lost and go-redis reconnected to resend")
		c, err = b.Claim(ctx, "k2", "fp", tb, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.InProgress, c.Outcome)

		p.LoseReplyTo([]byte(prefix + "k2"))
		require.NoError(t, a.Complete(ctx, "k2", ta, []byte("done"), time.Minute))
		p.LoseReplyTo([]byte(prefix + "k2"))
		require.NoError(t, a.Release(ctx, "k2", ta), "a resent Release of a completed key changes nothing")
		c, err = b.Claim(ctx, "k2", "fp", tb, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Completed, c.Outcome)
	})
}

// TestServerHangs: a server that never answers. With the client's
// ContextTimeoutEnabled, a call returns when its context ends, with an error
// matching the context's.
func TestServerHangs(t *testing.T) {
	mr, _ := newMini(t)
	p := newProxy(t, mr.Addr())
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Ping(context.Background()).Err())
	s := redis.MustNew(t, c, redis.WithEvictionCheck(false))
	p.SetBlackhole(true)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	elapsed := time.Since(start)
	wantBackendError(t, err, "claim")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, elapsed, 2*time.Second, "Claim took %v to notice its context ended", elapsed)
}

// TestForeignValues: a key under the prefix that holds something else is
// reported as an error by Claim, Complete and Get, and never overwritten;
// Release leaves a foreign string alone (it is not the token's record) and
// reports a key of another type as the server's WRONGTYPE error.
func TestForeignValues(t *testing.T) {
	_, c := newMini(t)
	ctx := context.Background()
	s := redis.MustNew(t, c, redis.WithPrefix("p:"), redis.WithEvictionCheck(false))
	require.NoError(t, c.Set(ctx, "p:text", "hello", 0).Err())
	require.NoError(t, c.Set(ctx, "p:v2", "\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00t", 0).Err())
	require.NoError(t, c.RPush(ctx, "p:list", "x").Err())
	for _, key := range []string{"text", "v2", "list"} {
		tok := store.NewToken()
		_, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		wantBackendError(t, err, "claim")
		_, err = s.Get(ctx, key)
		wantBackendError(t, err, "get")
		wantBackendError(t, s.Complete(ctx, key, tok, []byte("r"), time.Minute), "complete")
		if key == "list" {
			wantBackendError(t, s.Release(ctx, key, tok), "release") // WRONGTYPE
		} else {
			assert.NoError(t, s.Release(ctx, key, tok), "Release of %q", key)
		}
	}
	v, err := c.Get(ctx, "p:text").Result()
	require.NoError(t, err)
	assert.Equal(t, "hello", v)
	assert.Equal(t, int64(1), c.LLen(ctx, "p:list").Val())
}

// dialCounter is a go-redis hook counting new connections.
type dialCounter struct{ n atomic.Int64 }

func (h *dialCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *dialCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (h *dialCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
