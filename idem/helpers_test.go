package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

var errBlip = errors.New("test: store blip")

// flaky wraps a store with hooks that make calls fail or wait. A hook gets
// the call's number (1-based, per method) and the token; a non-nil error is
// returned without calling the store.
type flaky struct {
	store.Store
	claim    func(n int, tok store.Token) error
	complete func(n int) error
	release  func(n int) error
	renew    func(n int) error
	// refuse, when set, sees each Complete's response: a non-nil error is
	// returned without calling the store.
	refuse func(resp []byte) error

	claims, completes, releases, renews atomic.Int32
}

func (f *flaky) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	n := int(f.claims.Add(1))
	if f.claim != nil {
		if err := f.claim(n, tok); err != nil {
			return store.Claim{}, err
		}
	}
	return f.Store.Claim(ctx, key, fp, tok, lease)
}

func (f *flaky) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	n := int(f.completes.Add(1))
	if f.complete != nil {
		if err := f.complete(n); err != nil {
			return err
		}
	}
	if f.refuse != nil {
		if err := f.refuse(resp); err != nil {
			return err
		}
	}
	return f.Store.Complete(ctx, key, tok, resp, retention)
}

func (f *flaky) Release(ctx context.Context, key string, tok store.Token) error {
	n := int(f.releases.Add(1))
	if f.release != nil {
		if err := f.release(n); err != nil {
			return err
		}
	}
	return f.Store.Release(ctx, key, tok)
}

func (f *flaky) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	n := int(f.renews.Add(1))
	if f.renew != nil {
		if err := f.renew(n); err != nil {
			return err
		}
	}
	return f.Store.Renew(ctx, key, tok, lease)
}

func newMemory(t testing.TB) *memory.Store {
	s, err := memory.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newManualMemory(t testing.TB) (*memory.Store, *storetest.ManualClock) {
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := memory.New(memory.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

func newEngine(t testing.TB, s store.Store, opts ...idem.Option) *idem.Engine {
	t.Helper()
	e, err := idem.New(s, opts...)
	require.NoError(t, err)
	return e
}

// recorder collects events.
type recorder struct {
	mu sync.Mutex
	ev []idem.Event
}

func (r *recorder) observe(e idem.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

func (r *recorder) count(k idem.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.ev {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// counter counts runs of the work per key.
type counter struct{ n atomic.Int32 }

func (c *counter) keep(resp string) idem.Work {
	return func(context.Context) idem.Verdict {
		c.n.Add(1)
		return idem.Keep([]byte(resp))
	}
}

// redisProc is a redis-server of the test's own on a private port, which the
// test may kill, restart, pause and resume.
type redisProc struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

func startRedis(t testing.TB) *redisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.InCI() {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &redisProc{t: t, port: port}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *redisProc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *redisProc) start() {
	p.t.Helper()
	p.cmd = exec.Command("redis-server", "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	require.NoError(p.t, p.cmd.Start())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", p.Addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a server process that is starting
	}
	p.t.Fatalf("redis-server on %s did not start", p.Addr())
}

// kill is kill -9; data is lost (no persistence).
func (p *redisProc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *redisProc) pause()  { require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGSTOP)) }
func (p *redisProc) resume() { require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGCONT)) }

func (p *redisProc) client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func key(t testing.TB) string { return fmt.Sprintf("idem-test:%s:%d", t.Name(), time.Now().UnixNano()) }

func testenvSet(name string) bool { return os.Getenv(name) != "" }

func mustRedis(t testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	t.Helper()
	s, err := redis.New(c, opts...)
	require.NoError(t, err)
	return s
}

// events turns a func into a Tracer that sees every Event of a run.
type events func(idem.Event)

func (events) TraceRunStart(ctx context.Context, _ idem.RunStart) context.Context { return ctx }
func (events) TraceRunEnd(context.Context, idem.RunEnd)                           {}
func (f events) TraceEvent(_ context.Context, ev idem.Event)                      { f(ev) }
