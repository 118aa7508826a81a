package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/loadtest"
	"github.com/idemkit/idemkit/internal/testenv"
)

// chaosRedis is a redis-server of the test's own on a private port, which
// the chaos test kills (-9) and restarts, pauses (SIGSTOP) and resumes.
// It writes every command to its append-only file before answering
// (appendfsync always), so a kill -9 loses nothing it acknowledged: the
// store keeps its promises and the test is about the middleware's.
type chaosRedis struct {
	t    *testing.T
	dir  string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func startChaosRedis(t *testing.T) *chaosRedis {
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
	r := &chaosRedis{t: t, dir: t.TempDir(), port: port}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *chaosRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *chaosRedis) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--loglevel", "warning")
	require.NoError(r.t, r.cmd.Start())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", r.addr(), 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a server process that is starting
	}
	r.t.Errorf("redis-server on %s did not start", r.addr())
}

func (r *chaosRedis) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func (r *chaosRedis) signal(s syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		require.NoError(r.t, r.cmd.Process.Signal(s))
	}
}

// TestChaosRedis runs the demo in lease mode over a Redis of its own while
// the load test pays, with -delay widening the window between a payment
// and its stored response, and breaks that Redis on a schedule: kill -9 and
// a restart a second later, then a SIGSTOP of two seconds. Afterwards every
// key has exactly one payment and every retry got it.
//
// IDEMKIT_CHAOS_DURATION (default 8s) sets how long the load runs; the
// schedule repeats for as long.
func TestChaosRedis(t *testing.T) {
	duration := 8 * time.Second
	if v := os.Getenv("IDEMKIT_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		duration = d
	}
	rs := startChaosRedis(t)
	c := defaultConfig()
	c.Store, c.RedisAddr, c.Delay = "redis", rs.addr(), 20*time.Millisecond
	d := startDemo(t, c)
	client := *d.srv.Client()
	client.Timeout = 15 * time.Second

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var kills, pauses int
	chaosDone := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		step := func(d time.Duration) bool {
			select {
			case <-time.After(d): // the schedule's own clock
				return true
			case <-loadDone:
				return false
			}
		}
		for {
			if !step(1500 * time.Millisecond) {
				return
			}
			rs.kill()
			kills++
			time.Sleep(time.Second) // Redis is down for a second
			rs.start()
			if !step(1500 * time.Millisecond) {
				return
			}
			rs.signal(syscall.SIGSTOP)
			pauses++
			time.Sleep(2 * time.Second) // Redis is paused for two
			rs.signal(syscall.SIGCONT)
		}
	}()
	rep, err := loadtest.Run(ctx, loadtest.Config{
		URL:      d.srv.URL,
		Client:   &client,
		Clients:  8,
		Keys:     1 << 30,
		Duration: duration,
	})
	close(loadDone)
	<-chaosDone
	require.NoError(t, err)
	t.Logf("chaos: %d kill -9 + restart, %d pauses, over %v:\n%s", kills, pauses, duration, rep)
	require.Positive(t, kills, "the schedule ran")
	require.True(t, rep.OK(), "invariants broken:\n%s", rep)
	require.Equal(t, rep.Keys, rep.Payments, "one payment per distinct key")
	require.Equal(t, rep.Payments, d.count(), "the demo's own count agrees")
}
