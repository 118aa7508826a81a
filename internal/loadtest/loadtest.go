// Package loadtest drives the payments demo's HTTP API with many concurrent
// clients, some of whose requests are retries of earlier ones (some sent while
// the original is still in flight), and checks afterwards that nothing was
// lost or done twice: one payment per distinct key, every retry answered with
// the original payment. cmd/idemload is its command; the demo's tests run it
// in a short mode.
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says what load to apply. Zero fields take the defaults noted.
type Config struct {
	URL             string        // base URL of the demo, e.g. http://127.0.0.1:3000
	Client          *http.Client  // default: one with a 10s timeout
	Clients         int           // concurrent clients; default 16
	Keys            int           // distinct idempotency keys; default 500
	RetryShare      float64       // share of requests that retry an earlier key; default 0.3
	ConcurrentShare float64       // share of new keys sent twice at once; default 0.1
	Duration        time.Duration // stop issuing new keys after this; default 1 minute
	Prefix          string        // key prefix; default a random one, so runs never collide
}

// Report is what a run saw and what it checked.
type Report struct {
	Requests   int // HTTP requests sent
	Created    int // 201 answers that were not replays
	Replayed   int // answers with Idempotent-Replayed: true
	Conflicts  int // 409 answers (the first request was still in flight)
	Errors     int // transport errors and statuses other than 201/409
	Keys       int // distinct keys that got a payment
	Payments   int // payments the server created during the run
	Elapsed    time.Duration
	P50, P99   time.Duration
	Violations []string // broken invariants; empty when the run is clean
}

// OK reports whether every invariant held.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests %d in %v (%.0f/s), p50 %v, p99 %v\n", r.Requests, r.Elapsed.Round(time.Millisecond),
		float64(r.Requests)/r.Elapsed.Seconds(), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	fmt.Fprintf(&b, "created %d, replayed %d, 409 %d, errors %d\n", r.Created, r.Replayed, r.Conflicts, r.Errors)
	fmt.Fprintf(&b, "distinct keys paid %d, payments made %d\n", r.Keys, r.Payments)
	if r.OK() {
		b.WriteString("OK: one payment per key, every retry got the original payment\n")
	}
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "… and %d more violations\n", len(r.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}

func (c Config) withDefaults() Config {
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Keys <= 0 {
		c.Keys = 500
	}
	if c.RetryShare <= 0 {
		c.RetryShare = 0.3
	}
	if c.ConcurrentShare <= 0 {
		c.ConcurrentShare = 0.1
	}
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("load-%08x-", rand.Uint32())
	}
	c.URL = strings.TrimSuffix(c.URL, "/")
	return c
}

// run is one load run's shared state.
type run struct {
	cfg Config

	mu         sync.Mutex
	ids        map[string]string // key → payment id it was answered with
	issued     []string          // keys sent at least once
	latencies  []time.Duration
	rep        Report
	violations map[string]bool
}

// Run applies the load and checks the invariants. It returns an error only
// when the run could not be made (the server unreachable before it began);
// broken invariants are in Report.Violations.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, ids: map[string]string{}, violations: map[string]bool{}}
	before, err := r.countPayments(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("loadtest: counting payments before the run: %w", err)
	}
	start := time.Now()
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range jobs {
				r.pay(ctx, key)
			}
		}()
	}
	r.generate(ctx, jobs, start)
	close(jobs)
	wg.Wait()
	r.settle(ctx)
	r.rep.Elapsed = time.Since(start)

	after, err := r.countPayments(ctx)
	if err != nil {
		r.violate("counting payments after the run: %v", err)
	}
	r.rep.Payments = after - before
	r.check()
	return r.rep, nil
}

// generate feeds new keys, retries of issued keys and concurrent duplicates.
func (r *run) generate(ctx context.Context, jobs chan<- string, start time.Time) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), 0))
	send := func(key string) bool {
		select {
		case jobs <- key:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i := 0; i < r.cfg.Keys && time.Since(start) < r.cfg.Duration; i++ {
		for rnd.Float64() < r.cfg.RetryShare && len(r.snapshotIssued()) > 0 {
			issued := r.snapshotIssued()
			if !send(issued[rnd.IntN(len(issued))]) {
				return
			}
		}
		key := r.cfg.Prefix + strconv.Itoa(i)
		r.mu.Lock()
		r.issued = append(r.issued, key)
		r.mu.Unlock()
		if !send(key) {
			return
		}
		if rnd.Float64() < r.cfg.ConcurrentShare && !send(key) {
			return
		}
	}
}

func (r *run) snapshotIssued() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.issued
}

// amount is the key's request body amount: the same for every retry.
func amount(key string) int {
	h := 0
	for _, c := range key {
		h = h*31 + int(c)
	}
	return 100 + (h&0x7fffffff)%100000
}

// pay sends key's payment until it gets an answer that settles it (201), or
// gives up after a few 409s or errors; settle tries those keys again later.
func (r *run) pay(ctx context.Context, key string) bool {
	for attempt := 0; attempt < 20; attempt++ {
		status, id, replayed, retryAfter, err := r.post(ctx, key)
		r.mu.Lock()
		r.rep.Requests++
		switch {
		case err != nil:
			r.rep.Errors++
		case status == http.StatusCreated:
			if replayed {
				r.rep.Replayed++
			} else {
				r.rep.Created++
			}
			if prev, ok := r.ids[key]; ok && prev != id {
				r.violateLocked("key %s answered with payment %s and later %s", key, prev, id)
			}
			r.ids[key] = id
		case status == http.StatusConflict:
			r.rep.Conflicts++
		case status == http.StatusUnprocessableEntity:
			r.violateLocked("key %s: 422 for a retry with the same body", key)
		default:
			r.rep.Errors++
		}
		r.mu.Unlock()
		if err == nil && status == http.StatusCreated {
			return true
		}
		if err != nil || status != http.StatusConflict {
			return false
		}
		wait := min(max(retryAfter, 10*time.Millisecond), 200*time.Millisecond)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
	}
	return false
}

// settle retries, one at a time, every issued key that never got a payment.
func (r *run) settle(ctx context.Context) {
	for _, key := range r.snapshotIssued() {
		for attempt := 0; attempt < 5; attempt++ {
			r.mu.Lock()
			_, ok := r.ids[key]
			r.mu.Unlock()
			if ok || r.pay(ctx, key) {
				break
			}
		}
	}
}

func (r *run) post(ctx context.Context, key string) (status int, id string, replayed bool, retryAfter time.Duration, err error) {
	body := fmt.Sprintf(`{"amount": %d}`, amount(key))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.URL+"/payments", strings.NewReader(body))
	if err != nil {
		return 0, "", false, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	start := time.Now()
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return 0, "", false, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	r.mu.Lock()
	r.latencies = append(r.latencies, time.Since(start))
	r.mu.Unlock()
	if err != nil {
		return 0, "", false, 0, err
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retryAfter = time.Duration(s) * time.Second
	}
	replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if resp.StatusCode == http.StatusCreated {
		var p struct {
			ID     json.RawMessage `json:"id"`
			Amount int             `json:"amount"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || len(p.ID) == 0 {
			return resp.StatusCode, "", replayed, 0, fmt.Errorf("201 with a body that is not a payment: %q", raw)
		}
		if p.Amount != amount(key) {
			r.violate("key %s: payment %s has amount %d, the request said %d", key, p.ID, p.Amount, amount(key))
		}
		id = string(bytes.Trim(p.ID, `"`))
	}
	return resp.StatusCode, id, replayed, retryAfter, nil
}

// countPayments asks GET /payments how many payments exist. It accepts a
// JSON array, or an object with a "payments" array or a "count" number.
func (r *run) countPayments(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.URL+"/payments", nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /payments: %s", resp.Status)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		return len(list), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, fmt.Errorf("GET /payments: unreadable body %.100q: %w", raw, err)
	}
	if c, ok := obj["count"]; ok {
		var n int
		err := json.Unmarshal(c, &n)
		return n, err
	}
	if ps, ok := obj["payments"]; ok {
		var list []json.RawMessage // null decodes as none
		err := json.Unmarshal(ps, &list)
		return len(list), err
	}
	return 0, errors.New("GET /payments: no payments array or count in the body")
}

func (r *run) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violateLocked(format, args...)
}

func (r *run) violateLocked(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	if !r.violations[v] {
		r.violations[v] = true
		r.rep.Violations = append(r.rep.Violations, v)
	}
}

// check computes the percentiles and the invariants that need the whole run.
func (r *run) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.latencies)
	if n := len(r.latencies); n > 0 {
		r.rep.P50 = r.latencies[n/2]
		r.rep.P99 = r.latencies[min(n-1, n*99/100)]
	}
	r.rep.Keys = len(r.ids)
	owner := map[string]string{}
	for key, id := range r.ids {
		if other, ok := owner[id]; ok {
			r.violateLocked("keys %s and %s were both answered with payment %s", other, key, id)
		}
		owner[id] = key
	}
	for _, key := range r.issued {
		if _, ok := r.ids[key]; !ok {
			r.violateLocked("key %s never got a payment", key)
		}
	}
	if r.rep.Payments != len(r.ids) {
		r.violateLocked("%d payments were made for %d distinct keys", r.rep.Payments, len(r.ids))
	}
}
