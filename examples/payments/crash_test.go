package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The crash tests run the demo as a real child process (this test binary
// re-run as TestCrashChild), kill it with SIGKILL at a chosen point, restart
// it on the same database and retry the same key.

const (
	crashEnvConfig = "IDEMKIT_CRASH_CONFIG" // the child's config, JSON
	crashEnvAt     = "IDEMKIT_CRASH_AT"     // where the child dies: reply, handler or "" (never)
	crashAddrLine  = "CRASH-CHILD-ADDR "
)

// TestCrashChild is the child process; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	raw := os.Getenv(crashEnvConfig)
	if raw == "" {
		t.Skip("only runs as the crash tests' child process")
	}
	var cfg config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child: config:", err)
		os.Exit(2)
	}
	kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	a, err := open(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	h := a.routes()
	switch at := os.Getenv(crashEnvAt); at {
	case "reply":
		// Outside the middleware: in transactional mode it writes only
		// after the commit, so the first write means "committed, not yet
		// answered".
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				w = &killWriter{ResponseWriter: w, kill: kill}
			}
			inner.ServeHTTP(w, r)
		})
	case "handler":
		// Inside the transaction: the payment row is inserted, not committed.
		a.ledger = &killLedger{ledger: a.ledger, kill: kill}
	case "":
	default:
		fmt.Fprintln(os.Stderr, "child: unknown", crashEnvAt, at)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: listen:", err)
		os.Exit(2)
	}
	fmt.Printf("%s%s\n", crashAddrLine, ln.Addr())
	// Serve until the parent kills the process.
	err = http.Serve(ln, h)
	fmt.Fprintln(os.Stderr, "child: serve:", err)
	os.Exit(2)
}

// killWriter kills the process at the first byte of the response.
type killWriter struct {
	http.ResponseWriter
	kill func()
}

func (w *killWriter) WriteHeader(int)             { w.kill() }
func (w *killWriter) Write([]byte) (int, error)   { w.kill(); return 0, errors.New("unreachable") }
func (w *killWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// killLedger kills the process right after the payment's INSERT ran.
type killLedger struct {
	ledger
	kill func()
}

func (l *killLedger) create(ctx context.Context, user string, amount int64) (payment, error) {
	p, err := l.ledger.create(ctx, user, amount)
	if err == nil {
		l.kill()
	}
	return p, err
}

// child is one running demo process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	done   chan struct{} // closed when the process has exited
	err    error         // from Wait, valid after done
	stderr *bytes.Buffer
	client *http.Client
}

// addrWriter watches the child's stdout for its address line.
type addrWriter struct {
	mu   sync.Mutex
	buf  []byte
	addr chan string
	sent bool
}

func (w *addrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		line, rest, ok := bytes.Cut(w.buf, []byte("\n"))
		if !ok {
			break
		}
		w.buf = rest
		if a, found := strings.CutPrefix(string(line), crashAddrLine); found {
			w.sent = true
			w.addr <- strings.TrimSpace(a)
			break
		}
	}
	return len(p), nil
}

// startChild runs the demo in a child process, dying at at ("" = never).
func startChild(t *testing.T, cfg config, at string) *child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvConfig+"="+string(raw), crashEnvAt+"="+at)
	aw := &addrWriter{addr: make(chan string, 1)}
	c := &child{cmd: cmd, done: make(chan struct{}), stderr: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = aw, c.stderr
	require.NoError(t, cmd.Start())
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	c.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	select {
	case c.addr = <-aw.addr:
	case <-c.done:
		t.Fatalf("child exited before serving: %v\n%s", c.err, c.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not serve within 30s\n%s", c.stderr)
	}
	return c
}

// wait waits for the child to exit by itself and checks it was SIGKILLed.
func (c *child) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("child still running 10s after it should have died")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, c.err, &ee, "stderr: %s", c.stderr)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child ended with %v; stderr: %s", c.err, c.stderr)
}

func (c *child) post(key, body string) (result, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+c.addr+"/payments", strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	r := result{status: resp.StatusCode, header: resp.Header, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(b, &r.payment); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (c *child) payments(t *testing.T) []payment {
	t.Helper()
	resp, err := c.client.Get("http://" + c.addr + "/payments")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var ps []payment
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ps))
	return ps
}

// TestCrash kills the demo process mid-request on the SQL stores, restarts
// it on the same database, and retries the same key.
func TestCrash(t *testing.T) {
	for _, sc := range storeCases() {
		if !sc.tx {
			continue // memory and Redis ledgers live in the process: nothing survives a crash to check
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Run("AfterCommitBeforeReply", func(t *testing.T) {
				cfg := sc.cfg(t)
				key, body := newKey(), `{"amount":1990}`
				c := startChild(t, cfg, "reply")
				_, err := c.post(key, body)
				require.Error(t, err, "the process died before answering")
				c.waitKilled(t)

				c = startChild(t, cfg, "")
				r, err := c.post(key, body)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, r.status, r.body)
				assert.True(t, r.replayed, "the payment committed before the crash: the retry replays it")
				ps := c.payments(t)
				require.Len(t, ps, 1, "exactly one payment")
				assert.Equal(t, ps[0], r.payment, "the replayed id is the committed payment's")
			})
			t.Run("MidHandler", func(t *testing.T) {
				cfg := sc.cfg(t)
				key, body := newKey(), `{"amount":1990}`
				c := startChild(t, cfg, "handler")
				_, err := c.post(key, body)
				require.Error(t, err, "the process died inside the handler")
				c.waitKilled(t)

				c = startChild(t, cfg, "")
				assert.Empty(t, c.payments(t), "the uncommitted payment rolled back with the crash")
				r, err := c.post(key, body)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, r.status, "the key is not stuck: %s", r.body)
				assert.False(t, r.replayed, "nothing committed: the retry really ran")
				again, err := c.post(key, body)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, again.status, again.body)
				assert.True(t, again.replayed)
				assert.Equal(t, r.payment, again.payment)
				ps := c.payments(t)
				require.Len(t, ps, 1, "exactly one payment")
				assert.Equal(t, ps[0], r.payment)
			})
		})
	}
}
