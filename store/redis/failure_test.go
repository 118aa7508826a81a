package redis_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	allCalls(t, redis.New(c, redis.WithLogger(slog.New(slog.DiscardHandler))))
}

func TestServerStopsMidTest(t *testing.T) {
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), MaxRetries: 1})
	t.Cleanup(func() { c.Close() })
	s := redis.New(c, redis.WithEvictionCheck(false))
	ctx := context.Background()
	tok := store.NewToken()
	cl, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, cl.Outcome)
	mr.Close()
	allCalls(t, s)
}

func TestNilClient(t *testing.T) {
	allCalls(t, redis.New(nil))
	assert.Error(t, redis.New(nil).CheckEviction(context.Background()))
}

// proxy is a TCP proxy to a Redis server that can cut every connection as
// soon as the server answers (the command ran, its reply is lost) or hold
// every reply back (a server that hangs).
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

const (
	pass int32 = iota
	cut
	hold
)

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client to server, always forwarded
			defer p.wg.Done()
			io.Copy(up, down)
			up.Close()
		}()
		go func() { // server to client, subject to the mode
			defer p.wg.Done()
			defer down.Close()
			defer up.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := up.Read(buf)
				if err != nil {
					return
				}
				switch p.mode.Load() {
				case pass:
					if _, err := down.Write(buf[:n]); err != nil {
						return
					}
				case cut:
					return
				case hold:
				}
			}
		}()
	}
}

// TestReplyLost: the connection is cut after Redis ran the Claim and before
// its reply arrived. The claimant gets an error, a competitor sees the key
// in progress (never both acquire), and the claimant's retry with its own
// token acquires it; likewise a Complete whose reply is lost is retried.
func TestReplyLost(t *testing.T) {
	mr, direct := newMini(t)
	p := newProxy(t, mr.Addr())
	viaProxy := goredis.NewClient(&goredis.Options{Addr: p.addr(), MaxRetries: 1})
	t.Cleanup(func() { viaProxy.Close() })
	ctx := context.Background()
	require.NoError(t, viaProxy.Ping(ctx).Err())

	prefix := testPrefix(t, direct)
	a := redis.New(viaProxy, redis.WithPrefix(prefix), redis.WithEvictionCheck(false))
	b := redis.New(direct, redis.WithPrefix(prefix), redis.WithEvictionCheck(false))
	ta, tb := store.NewToken(), store.NewToken()

	p.mode.Store(cut)
	_, err := a.Claim(ctx, "k", "fp", ta, time.Minute)
	wantBackendError(t, err, "claim")

	c, err := b.Claim(ctx, "k", "fp", tb, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.InProgress, c.Outcome, "the competitor must not acquire a key whose claim ran")
	require.Equal(t, ta, c.Record.Token)

	p.mode.Store(pass)
	c, err = a.Claim(ctx, "k", "fp", ta, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome, "the claimant's retry after a lost reply")

	p.mode.Store(cut)
	wantBackendError(t, a.Complete(ctx, "k", ta, []byte("done"), time.Minute), "complete")
	p.mode.Store(pass)
	require.NoError(t, a.Complete(ctx, "k", ta, []byte("done"), time.Minute), "retried Complete after a lost reply")

	c, err = b.Claim(ctx, "k", "fp", tb, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Completed, c.Outcome)
	assert.Equal(t, []byte("done"), c.Record.Response)
}

// TestServerHangs: a server that never answers. With the client's
// ContextTimeoutEnabled, a call returns when its context ends, with an error
// matching the context's.
func TestServerHangs(t *testing.T) {
	mr, _ := newMini(t)
	p := newProxy(t, mr.Addr())
	c := goredis.NewClient(&goredis.Options{Addr: p.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Ping(context.Background()).Err())
	s := redis.New(c, redis.WithEvictionCheck(false))
	p.mode.Store(hold)

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
	s := redis.New(c, redis.WithPrefix("p:"), redis.WithEvictionCheck(false))
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
