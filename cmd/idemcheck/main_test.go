package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/brokenidem"
)

// args returns the command line for the payments endpoint at base.
func args(base string, extra ...string) []string {
	return append([]string{
		"-url", base + "/payments", "-body", `{"amount":1990}`, "-other-body", `{"amount":5}`,
		"-count-url", base + "/payments",
	}, extra...)
}

func runCheck(t *testing.T, a ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), a, &out, &errb)
	return code, out.String(), errb.String()
}

// demo builds the payments demo, starts it on a free loopback port with the
// given flags, and returns its base URL. Nothing imports examples: the test
// runs the binary, as an operator would.
func demo(t *testing.T, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "payments")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the demo needs the go command: %v", err)
	}
	build := exec.Command(gobin, "build", "-o", bin, "github.com/idemkit/idemkit/examples/payments")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the demo: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-addr", addr, "-purge-every", "0"}, flags...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("demo's log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/payments")
		if err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case <-exited:
			t.Fatalf("the demo exited:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond): // polling the demo's port until it listens
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not serve within 30s: %v\n%s", err, logs.String())
		}
	}
}

// TestDemoPasses runs idemcheck against the payments demo on SQLite
// (transactional mode) with a handler latency, so that duplicates are in
// flight: every rule it can check from outside passes, table and JSON.
func TestDemoPasses(t *testing.T) {
	base := demo(t, "-store-url", "sqlite://payments.db", "-delay", "300ms")
	a := args(base, "-max-body", "1048576",
		"-scope-header", "Authorization: Bearer alice", "-scope-header", "Authorization: Bearer bob")
	code, out, errs := runCheck(t, a...)
	if code != 0 {
		t.Fatalf("exit %d against the demo:\n%s%s", code, out, errs)
	}
	for _, want := range []string{"RULE", "keys/missing", "PASS", "faults/lost-reply", "scope/separate", "0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q:\n%s", want, out)
		}
	}
	t.Logf("idemcheck against the demo:\n%s", out)

	code, out, errs = runCheck(t, append(a, "-json", "-rules", "keys,replay")...)
	if code != 0 {
		t.Fatalf("exit %d with -json:\n%s%s", code, out, errs)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json: %v\n%s", err, out)
	}
	if rep.Pass != 5 || rep.Fail != 0 || len(rep.Results) != 5 || rep.Requests == 0 {
		t.Errorf("-json report: %+v", rep)
	}
}

// TestBrokenServersFail runs idemcheck against the broken middlewares of
// internal/brokenidem, one rule broken at a time: it exits 1 and names that
// rule, and only that rule fails. Not-kept and restart need an in-process
// target (httpidemtest's own tests prove them); idemcheck skips them.
func TestBrokenServersFail(t *testing.T) {
	for _, b := range brokenidem.Breaks {
		if strings.HasPrefix(b, "notkept/") || b == "faults/restart" {
			continue
		}
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			o := brokenidem.Options{Break: b, MaxBody: 4096}
			if b == "inflight/conflict-or-wait" {
				o.Wait = 100 * time.Millisecond // then the broken wait runs the handler
			}
			app := brokenidem.NewApp(o)
			if strings.HasPrefix(b, "inflight/") {
				app.Delay = 400 * time.Millisecond // duplicates in flight need latency
			}
			srv := httptest.NewServer(app)
			t.Cleanup(srv.Close)
			a := args(srv.URL, "-max-body", "4096", "-scope-header", "X-Tenant: alice", "-scope-header", "X-Tenant: bob")
			if strings.HasPrefix(b, "inflight/") {
				// The other breaks keep the default 100 ms, longer than the
				// burst break's 50 ms gap between check and claim: a
				// duplicate sent inside that gap would find it too.
				a = append(a, "-inflight-after", "50ms")
			}
			code, out, errs := runCheck(t, a...)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s%s", code, out, errs)
			}
			if !strings.Contains(out, "rule "+b+": fail") {
				t.Errorf("the report does not name %s:\n%s", b, out)
			}
			code, out, _ = runCheck(t, append(a, "-json")...)
			var rep report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
				t.Fatalf("-json: exit %d, %v\n%s", code, err, out)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Verdict == "fail" {
					failed = append(failed, r.Rule)
					if len(r.Exchanges) == 0 {
						t.Errorf("%s failed without its exchanges", r.Rule)
					}
				}
			}
			want := []string{b}
			if b == "inflight/conflict-or-wait" {
				// On a slow endpoint the burst's duplicates are in flight
				// too, and their wait ends in a second run: both fail.
				want = []string{b, "concurrency/burst"}
			}
			if !slices.Equal(failed, want) {
				t.Errorf("failed %v, want only %v:\n%s", failed, want, out)
			}
		})
	}
}

// TestUsage covers the errors that are the operator's: exit 2 and a message.
func TestUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "-url is required"},
		{[]string{"-url", "http://127.0.0.1:1/p", "-body", "{}"}, "-other-body are required"},
		{[]string{"-url", "http://127.0.0.1:1/p", "-body", "{}", "-other-body", "[]"}, "-count-url is required"},
		{args("ftp://127.0.0.1:1"), "not an http"},
		{args("http://127.0.0.1:1", "-count-url", "http://127.0.0.2:1/p"), "talks only to the target"},
		{args("http://127.0.0.1:1", "-header", "nocolon"), "not \"Name: value\""},
		{args("http://127.0.0.1:1", "-rules", "nosuch"), "no rule or group"},
		{args("http://127.0.0.1:1", "extra"), "unexpected arguments"},
	}
	for _, c := range cases {
		code, _, errs := runCheck(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("idemcheck %q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	code, _, errs := runCheck(t, "-h")
	if code != 0 || !strings.Contains(errs, "ONLY to the host of -url") {
		t.Errorf("-h: exit %d, the help does not say where traffic goes:\n%s", code, errs)
	}
}

// TestConfigFile reads the run from a JSON file; a flag overrides it.
func TestConfigFile(t *testing.T) {
	app := brokenidem.NewApp(brokenidem.Options{})
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "check.json")
	cfg := `{"url": "` + srv.URL + `/payments", "body": "{\"amount\":1990}", "other-body": "{\"amount\":5}",
		"count-url": "` + srv.URL + `/payments", "scope-header": ["X-Tenant: a", "X-Tenant: b"], "rules": "keys/missing", "timeout": "30s"}`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCheck(t, "-config", path, "-rules", "scope")
	if code != 0 || !strings.Contains(out, "scope/separate") || strings.Contains(out, "keys/missing") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	if err := os.WriteFile(path, []byte(`{"nosuch": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCheck(t, "-config", path); code != 2 || !strings.Contains(errs, "nosuch") {
		t.Errorf("an unknown member: exit %d, %s", code, errs)
	}
}

// TestBounded stops at -max-requests: the rules past the budget fail, and
// the run says why.
func TestBounded(t *testing.T) {
	srv := httptest.NewServer(brokenidem.NewApp(brokenidem.Options{}))
	t.Cleanup(srv.Close)
	code, out, _ := runCheck(t, args(srv.URL, "-max-requests", "10")...)
	if code != 1 || !strings.Contains(out, "request budget") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
