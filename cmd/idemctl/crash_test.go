package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/keyer"
)

// The crash test of issue 25: the payments demo in lease mode, killed with
// SIGKILL while a slow request holds its key, looked at and cleared with
// idemctl, then restarted for the client's retry. Both programs are built
// with go build and run as real processes on a real store.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries builds idemctl and the payments demo once per test binary and
// returns their paths.
func binaries(t *testing.T) (idemctl, payments string) {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			// Not on PATH: the go command that runs this test sets GOROOT
			// for it.
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		if buildDir, buildErr = os.MkdirTemp("", "idemctl-crash-"); buildErr != nil {
			return
		}
		cmd := exec.Command(goTool, "build", "-o", buildDir+string(filepath.Separator),
			"github.com/idemkit/idemkit/cmd/idemctl", "github.com/idemkit/idemkit/examples/payments")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "idemctl"), filepath.Join(buildDir, "payments")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// crashBackend is one store the crash test runs on: the URL both programs
// open, with a table or prefix of the test's own, and the demo's payments
// table.
type crashBackend struct {
	url           string
	paymentsTable string
	sqlLedger     bool // the payments outlive the demo's process
}

func crashBackends() map[string]func(t *testing.T) crashBackend {
	return map[string]func(t *testing.T) crashBackend{
		"sqlite": func(t *testing.T) crashBackend {
			return crashBackend{url: "sqlite://" + filepath.Join(t.TempDir(), "keys.db"), paymentsTable: "payments", sqlLedger: true}
		},
		"postgres": func(t *testing.T) crashBackend {
			u := needEnv(t, "IDEMKIT_POSTGRES_URL")
			keys, pays := unique("idemctl_crash_"), unique("idemctl_pay_")
			t.Cleanup(func() { dropPostgres(t, u, keys); dropPostgres(t, u, pays) })
			return crashBackend{url: u + sep(u) + "table=" + keys, paymentsTable: pays, sqlLedger: true}
		},
		"mysql": func(t *testing.T) crashBackend {
			dsn := needEnv(t, "IDEMKIT_MYSQL_DSN") // root@tcp(127.0.0.1:3306)/test
			user, rest, _ := strings.Cut(dsn, "@tcp(")
			addr, db, _ := strings.Cut(rest, ")/")
			keys, pays := unique("idemctl_crash_"), unique("idemctl_pay_")
			t.Cleanup(func() { dropMySQL(t, dsn, keys); dropMySQL(t, dsn, pays) })
			return crashBackend{url: "mysql://" + user + "@" + addr + "/" + db + "?table=" + keys, paymentsTable: pays, sqlLedger: true}
		},
		"redis": func(t *testing.T) crashBackend {
			addr := needEnv(t, "IDEMKIT_REDIS_ADDR")
			prefix := unique("idemctl-crash:") + ":"
			t.Cleanup(func() { forgetRedis(t, addr, prefix) })
			return crashBackend{url: "redis://" + addr + "/0?prefix=" + prefix, paymentsTable: "payments"}
		},
	}
}

// syncBuffer is a process's stderr, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// demoProc is one running payments demo.
type demoProc struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	stderr *syncBuffer
	done   chan struct{}
}

var addrRE = regexp.MustCompile(`msg="serving payments" addr=(\S+)`)

// startPayments starts the demo in lease mode on b and waits until it
// serves.
func startPayments(t *testing.T, bin string, b crashBackend, lease time.Duration) *demoProc {
	t.Helper()
	d := &demoProc{stderr: &syncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(bin, "-store-url", b.url, "-mode", "lease", "-lease", lease.String(), "-addr", "127.0.0.1:0",
		"-payments-table", b.paymentsTable, "-purge-every", "0", "-wait", "0")
	d.cmd.Stdout, d.cmd.Stderr = io.Discard, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := addrRE.FindStringSubmatch(d.stderr.String()); m != nil {
			d.base = "http://" + m[1]
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("the demo exited before serving: %s", d.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not serve within 20s: %s", d.stderr)
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *demoProc) kill() {
	d.cmd.Process.Kill()
	<-d.done
}

type postResult struct {
	status   int
	replayed bool
	body     string
	err      error
}

func (d *demoProc) post(key, body string) postResult {
	req, err := http.NewRequest(http.MethodPost, d.base+"/payments", strings.NewReader(body))
	if err != nil {
		return postResult{err: err}
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return postResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return postResult{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(b), err: err}
}

func (d *demoProc) count(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(d.base + "/payments")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ps []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /payments = %d, %v", resp.StatusCode, err)
	}
	return len(ps)
}

// idemctlBin runs the idemctl binary on url and returns its exit code,
// stdout and stderr.
func idemctlBin(t *testing.T, bin, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-store-url", url}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errOut.String()
}

// entryOf returns the JSON line of key in idemctl's list --json output.
func entryOf(t *testing.T, out, key string) map[string]any {
	t.Helper()
	for _, l := range jsonLines(t, out) {
		if l["key"] == key {
			return l
		}
	}
	return nil
}

// TestLeaseCrash is issue 25's "done when": a key whose holder was killed
// mid-work is seen in flight, then lapsed, is cleared with an audit line,
// and the client's retry runs the work again, as attempt 2; a completed key
// is not released.
func TestLeaseCrash(t *testing.T) {
	idemctl, payments := binaries(t)
	const lease = time.Second
	for _, name := range []string{"sqlite", "postgres", "mysql", "redis"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			b := crashBackends()[name](t)
			demo := startPayments(t, payments, b, lease)
			clientKey := unique("order-")
			key, err := keyer.ScopedKey(clientKey, "anonymous") // as the demo's middleware stores it
			if err != nil {
				t.Fatal(err)
			}
			// Slow enough to be killed in flight, short enough for the retry.
			body := `{"amount":1990,"slow_ms":6000}`
			first := make(chan postResult, 1)
			go func() { first <- demo.post(clientKey, body) }()
			deadline := time.Now().Add(15 * time.Second)
			for demo.count(t) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the slow request made no payment: %s", demo.stderr)
				}
				time.Sleep(20 * time.Millisecond)
			}

			// In flight: idemctl lists the key in progress, attempt 1.
			code, out, errOut := idemctlBin(t, idemctl, b.url, "-raw", "list", "--state", "in_progress", "--json")
			e := entryOf(t, out, key)
			if code != 0 || e == nil || e["state"] != "in_progress" || e["attempt"] != float64(1) {
				t.Fatalf("list --state in_progress while the request runs = %d %q %q; want %q, attempt 1", code, out, errOut, key)
			}
			holder, fence1 := e["token_hash"], e["fence"].(float64)

			demo.kill()
			if r := <-first; r.err == nil {
				t.Fatalf("the slow request was answered before the kill (%d %s): make slow_ms longer", r.status, r.body)
			}

			// Once the lease passes: lapsed, the same holder.
			deadline = time.Now().Add(lease + 10*time.Second)
			for {
				code, out, errOut = idemctlBin(t, idemctl, b.url, "-raw", "list", "--state", "lapsed", "--json")
				if e = entryOf(t, out, key); e != nil || code != 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the key never showed lapsed after the kill: %q %q", out, errOut)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code != 0 || e["token_hash"] != holder || e["attempt"] != float64(1) {
				t.Fatalf("list --state lapsed = %d %q %q; want %q held by %v, attempt 1", code, out, errOut, key, holder)
			}

			// release: the audit line says the key is free (the next claim
			// takes it over) and who held it.
			auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
			code, out, errOut = idemctlBin(t, idemctl, b.url, "-raw", "release", key, "--reason", "INC-25: demo killed mid-payment", "--audit-file", auditFile)
			if code != 0 || !strings.Contains(out, "already free") || !strings.Contains(out, "attempt 2") {
				t.Fatalf("release of the lapsed key = %d %q %q", code, out, errOut)
			}
			raw, err := os.ReadFile(auditFile)
			if err != nil {
				t.Fatal(err)
			}
			al := jsonLines(t, string(raw))
			if len(al) != 1 {
				t.Fatalf("audit file %q: want one line", raw)
			}
			a := al[0]
			for field, want := range map[string]any{
				"action": "release", "key": key, "reason": "INC-25: demo killed mid-payment", "outcome": "already_free",
				"state_before": "lapsed", "token_hash": holder, "attempt": float64(1),
			} {
				if a[field] != want {
					t.Errorf("audit line %s = %v, want %v (line %s)", field, a[field], want, raw)
				}
			}
			if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["time"])); err != nil || ts.Before(start) || a["store"] == "" || a["lease_until"] == nil {
				t.Errorf("audit line time, store or lease_until: %s", raw)
			}

			// The demo again; the client retries: the work runs again.
			demo = startPayments(t, payments, b, lease)
			before := demo.count(t)
			if b.sqlLedger && before != 1 {
				t.Errorf("payments after the crash = %d, want the killed request's 1", before)
			}
			r := demo.post(clientKey, body)
			if r.err != nil || r.status != http.StatusCreated || r.replayed {
				t.Fatalf("retry after the crash = %+v; want 201, not a replay", r)
			}
			if after := demo.count(t); after != before+1 {
				t.Errorf("payments after the retry = %d, want %d: the work ran again", after, before+1)
			}
			if !strings.Contains(demo.stderr.String(), "taking over a key") {
				t.Errorf("the retry's handler was not told it took the key over: %s", demo.stderr)
			}
			code, out, errOut = idemctlBin(t, idemctl, b.url, "-raw", "show", key, "--json")
			s := jsonLines(t, out)
			if code != 0 || len(s) != 1 || s[0]["state"] != "completed" || s[0]["attempt"] != float64(2) || !(s[0]["fence"].(float64) > fence1) {
				t.Errorf("show after the retry = %d %q %q; want completed, attempt 2, a fence above %v", code, out, errOut, fence1)
			}

			// A completed key is refused by release without --force.
			code, _, errOut = idemctlBin(t, idemctl, b.url, "-raw", "release", key, "--reason", "try")
			if code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, `"outcome":"refused"`) {
				t.Errorf("release of the completed key = %d %q; want 1, refused, an audit line", code, errOut)
			}
			if again := demo.post(clientKey, body); again.status != http.StatusCreated || !again.replayed {
				t.Errorf("a retry after the refused release = %+v; want a replay", again)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Logf("%s took %v (the aim is under 30s)", name, took)
			}
		})
	}
}
