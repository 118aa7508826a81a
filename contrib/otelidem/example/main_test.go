package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// client keeps no connection open between requests: a connection dialed
// but never used is "new" to the server, and Shutdown waits 5s for such a
// connection before it counts it idle, which is as long as serve waits.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// start serves the example on a free port until the test ends.
func start(t *testing.T, cfg config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, cfg, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		logs.Close()
	})
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, base, key, body string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/payments", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metric reads one series from /metrics: the value of the line that starts
// with name and holds every label in labels.
func metric(t *testing.T, base, name string, labels ...string) float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
next:
	for _, l := range strings.Split(string(b), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, lab := range labels {
			if !strings.Contains(m[1], lab) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return 0
}

// TestTenParallelShows409And422Counters is the seeds' exercise against the
// example: ten identical requests at once (one 201, nine 409 with -wait 0),
// two retries (replays), one reuse of the key for another body (422), one
// declined payment (502: released), then the counters on /metrics.
func TestTenParallelShows409And422Counters(t *testing.T) {
	base := start(t, config{Store: "memory", Delay: 300 * time.Millisecond, Retention: time.Hour, PurgeEvery: time.Hour})
	const key = "5d0f0c52-3b8e-4a44-9f7e-2a9c0d1e7b11"
	codes := make([]int, 10)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = post(t, base, key, `{"amount":1990}`)
		}()
	}
	wg.Wait()
	sort.Ints(codes)
	if fmt.Sprint(codes) != "[201 409 409 409 409 409 409 409 409 409]" {
		t.Fatalf("ten at once: %v, want one 201 and nine 409", codes)
	}
	// The first client has its answer as soon as the handler returns, a
	// moment before its key is recorded: with -wait 0 a retry at that very
	// moment may still see 409, so the first retry tries again after that.
	deadline := time.Now().Add(2 * time.Second)
	early := 0.0 // retries that came before the key was recorded
	for c := post(t, base, key, `{"amount":1990}`); c != 201; c = post(t, base, key, `{"amount":1990}`) {
		if c != 409 || time.Now().After(deadline) {
			t.Fatalf("retry: %d", c)
		}
		early++
		time.Sleep(10 * time.Millisecond)
	}
	if c := post(t, base, key, `{"amount":1990}`); c != 201 {
		t.Fatalf("retry: %d", c)
	}
	if c := post(t, base, key, `{"amount":9999}`); c != 422 {
		t.Fatalf("another body: %d", c)
	}
	if c := post(t, base, "declined-1", `{"amount":500000}`); c != 502 {
		t.Fatalf("declined: %d", c)
	}
	for outcome, want := range map[string]float64{"acquired": 2, "in_progress": 9 + early, "replayed": 2, "mismatch": 1} {
		if got := metric(t, base, "idem_claims_total", `idem_outcome="`+outcome+`"`); got != want {
			t.Errorf("idem_claims_total{idem_outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := metric(t, base, "idem_settles_total", `idem_outcome="completed"`); got != 1 {
		t.Errorf("idem_settles_total{completed} = %v, want 1", got)
	}
	if got := metric(t, base, "idem_settles_total", `idem_outcome="released"`); got != 1 {
		t.Errorf("idem_settles_total{released} = %v, want 1", got)
	}
	if got := metric(t, base, "idem_store_duration_seconds_count", `idem_op="claim"`, `idem_store="memory"`); got != 14+early {
		t.Errorf("claim calls = %v, want %v", got, 14+early)
	}
	if got := metric(t, base, "idem_work_duration_seconds_sum"); got < 0.3 {
		t.Errorf("work took %vs, want at least the 0.3s delay", got)
	}
}

// TestPurgeJobRunsInTheExample: with SQLite, a short retention and a short
// purge interval, the key leaves the table and the purge counter shows it.
func TestPurgeJobRunsInTheExample(t *testing.T) {
	base := start(t, config{Store: "sqlite", DB: filepath.Join(t.TempDir(), "idem.db"),
		Retention: 20 * time.Millisecond, PurgeEvery: 10 * time.Millisecond})
	for i := range 3 {
		if c := post(t, base, fmt.Sprintf("key-%d", i), `{"amount":1}`); c != 201 {
			t.Fatalf("post: %d", c)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, base, "idem_purge_deleted_total", `idem_store="sqlite"`) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the purge job deleted fewer than 3 records in 10s")
		}
		time.Sleep(10 * time.Millisecond) // the purge interval: the real clock is the subject
	}
	if metric(t, base, "idem_purge_runs_total", `idem_result="ok"`) < 1 {
		t.Fatal("no successful purge run counted")
	}
}

func TestUnknownStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := serve(context.Background(), ln, config{Store: "floppy"}, os.Stderr); err == nil || !strings.Contains(err.Error(), "floppy") {
		t.Fatalf("serve with -store floppy: %v", err)
	}
}

// TestOldestInFlightOnMetrics: the age of the oldest run in flight is on
// /metrics under the name the README's alert uses, above 0 while a slow
// payment runs and 0 once it answered.
func TestOldestInFlightOnMetrics(t *testing.T) {
	base := start(t, config{Store: "memory", Delay: 600 * time.Millisecond, Retention: time.Hour, PurgeEvery: time.Hour})
	done := make(chan int, 1)
	go func() { done <- post(t, base, "slow-1", `{"amount":1990}`) }()
	deadline := time.Now().Add(5 * time.Second)
	for metric(t, base, "idem_inflight_oldest_age_seconds") < 0.1 {
		if time.Now().After(deadline) {
			t.Fatal("idem_inflight_oldest_age_seconds never rose above 0.1 while a payment ran for 0.6s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c := <-done; c != 201 {
		t.Fatalf("post: %d", c)
	}
	// The client has its answer a moment before the key is recorded and
	// the run ends: the age drops to 0 then.
	for got := metric(t, base, "idem_inflight_oldest_age_seconds"); got != 0; got = metric(t, base, "idem_inflight_oldest_age_seconds") {
		if time.Now().After(deadline) {
			t.Fatalf("idem_inflight_oldest_age_seconds after the payment = %v, want 0", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
