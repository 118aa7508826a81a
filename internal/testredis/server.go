package testredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
)

// Binary returns the path of redis-server, or skips t when it is not on PATH
// (fails it under CI, where .ci/run installs it). It skips under -short too:
// the tests that start servers are the slow ones.
func Binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is not on PATH; CI needs it (bash .ci/run installs it)")
		}
		t.Skip("redis-server is not on PATH")
	}
	return bin
}

// Server is a redis-server process a test started on a private loopback
// port, in a directory of its own. It is killed when the test ends.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string

	t    testing.TB
	bin  string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start runs redis-server on a free port in the range 18000–19999 whose
// cluster bus port (port+10000) is free too, with no persistence
// (--save "" --appendonly no) unless args say otherwise (later arguments
// win), and returns once it answers PING.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := Binary(t)
	s := &Server{t: t, bin: bin, Port: freePort(t), Dir: t.TempDir()}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"), "--save", "", "--appendonly", "no",
		"--repl-diskless-sync-delay", "0"}, args...)
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a port in 18000–19999 that, with port+10000, nobody
// listens on at the moment.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 18000 + rand.IntN(2000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair in 18000-19999")
	return 0
}

func (s *Server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server on %s: %v", s.Addr, err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer PING: %v\n%s", s.Addr, err, s.Log())
		}
		time.Sleep(20 * time.Millisecond) // polling a process we started
	}
}

// Log returns the server's log file.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// Kill sends SIGKILL (kill -9) and waits for the process to end; it does
// nothing when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Restart starts the server again, killed or not, with the same arguments,
// port and directory (what it kept on disk, if anything, is loaded).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Pause stops the process (SIGSTOP): it keeps its connections but answers
// nothing until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redis-server on %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server on %s: %v", sig, s.Addr, err)
	}
}

// Client returns a client of this server alone, closed when the test ends.
func (s *Server) Client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// StartReplica starts a server replicating from s and returns once its link
// to s is up.
func (s *Server) StartReplica(t testing.TB, args ...string) *Server {
	t.Helper()
	r := Start(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(s.Port)}, args...)...)
	c := r.Client()
	Eventually(t, 10*time.Second, "replica "+r.Addr+" linked to "+s.Addr, func() error {
		return linkUp(c)
	})
	// Linked is not yet acknowledging: wait until a write on the master is
	// acknowledged by the replica (WAIT on the writing connection).
	m := s.Client()
	Eventually(t, 10*time.Second, "replica "+r.Addr+" acknowledges writes", func() error {
		p := m.Pipeline()
		p.Set(context.Background(), "testredis:replica-ready", "1", time.Second)
		w := p.Do(context.Background(), "wait", 1, 100)
		if _, err := p.Exec(context.Background()); err != nil {
			return err
		}
		if n, _ := w.Int64(); n < 1 {
			return fmt.Errorf("WAIT 1 100 answered %d", n)
		}
		return nil
	})
	return r
}

// linkUp reports whether a replica's link to its master is up.
func linkUp(c *goredis.Client) error {
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("replication link not up:\n%s", info)
	}
	return nil
}

// Eventually calls f until it returns nil, every 20 ms, and fails t with
// f's last error when that takes longer than within. It is for waiting on
// server processes (a failover, a replica's sync), never on goroutines.
func Eventually(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(20 * time.Millisecond) // polling server processes
	}
}
