package idemclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/internal/retry"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// ledger is a payment handler that counts charges per "ref".
type ledger struct {
	mu      sync.Mutex
	charges map[string]int
	next    int
	// hold, when set, is called before charging (a test holds a request in
	// flight with it).
	hold func(ref string)
}

func newLedger() *ledger { return &ledger{charges: map[string]int{}} }

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ref    string `json:"ref"`
		Amount int    `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if l.hold != nil {
		l.hold(req.Ref)
	}
	l.mu.Lock()
	l.charges[req.Ref]++
	l.next++
	id := l.next
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d,"ref":%q}`, id, req.Ref)
}

func (l *ledger) count(ref string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.charges[ref]
}

// idemServer serves h behind httpidem on a fresh memory store, with an
// engine that answers a key in flight with 409 at once (opts are the
// engine's).
func idemServer(t *testing.T, h http.Handler, opts ...idem.Option) *httptest.Server {
	t.Helper()
	st, err := memory.New()
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := idem.New(st, append([]idem.Option{idem.WithWait(0)}, opts...)...)
	require.NoError(t, err)
	mw, err := httpidem.New(e)
	require.NoError(t, err)
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv
}

// fastSleep records every wait and does not sleep.
type fastSleep struct {
	mu    sync.Mutex
	waits []time.Duration
	hook  func(n int) // called with the wait's index, before it returns
}

func (f *fastSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	n := len(f.waits) - 1
	f.mu.Unlock()
	if f.hook != nil {
		f.hook(n)
	}
	return ctx.Err()
}

func (f *fastSleep) all() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

func newFast(t testing.TB, opts ...Option) (*Transport, *fastSleep) {
	f := &fastSleep{}
	tr := mustNew(t, opts...)
	tr.policy.Sleep = f.sleep
	return tr, f
}

func post(t *testing.T, c *http.Client, ctx context.Context, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestLostRepliesEachPaidOnce is the check: N logical payments go
// through a proxy that loses the reply to each one's first attempt; each is
// charged once and the client gets the first answer, replayed.
func TestLostRepliesEachPaidOnce(t *testing.T) {
	l := newLedger()
	srv := idemServer(t, l)
	px, err := faultproxy.New(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { px.Close() })
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	c := &http.Client{Transport: mustNew(t, WithBase(base), WithBackoff(5*time.Millisecond, 20*time.Millisecond))}

	const n = 8
	for i := range n {
		ref := fmt.Sprintf("pay-%03d", i)
		px.LoseReplyTo([]byte(ref))
		resp, body := post(t, c, t.Context(), "http://"+px.Addr()+"/payments", `{"ref":"`+ref+`","amount":100}`)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		assert.True(t, Replayed(resp), "%s: the retry after the lost reply must be a replay", ref)
		assert.Contains(t, body, ref)
		assert.Equal(t, 1, l.count(ref), "%s charged once", ref)
		assert.NotEmpty(t, KeyOf(resp))
	}
	assert.Equal(t, n, l.next, "one charge per logical payment")
}

// TestInFlightConflictWaitsRetryAfter: a call that meets its own key in
// flight (409 + Retry-After) waits what the server said, then replays.
func TestInFlightConflictWaitsRetryAfter(t *testing.T) {
	l := newLedger()
	entered, release := make(chan struct{}), make(chan struct{})
	l.hold = func(string) {
		close(entered)
		<-release
	}
	srv := idemServer(t, l, idem.WithLease(2*time.Second))
	tr, f := newFast(t)
	c := &http.Client{Transport: tr}
	ctx := WithKey(t.Context(), "order-42")
	body := `{"ref":"order-42","amount":5}`

	first := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			first <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- string(b)
	}()
	<-entered
	// The second call's first attempt gets 409; during its wait the first
	// call finishes, so the retry replays.
	f.hook = func(int) {
		close(release)
		<-first
	}
	resp, got := post(t, c, ctx, srv.URL, body)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.True(t, Replayed(resp))
	assert.Equal(t, 1, l.count("order-42"))
	waits := f.all()
	require.Len(t, waits, 1)
	// httpidem's Retry-After is a short hint, at most 2 s (the lease's
	// remaining time, rounded up: 2 here, 1 on a machine that stalled).
	assert.GreaterOrEqual(t, waits[0], time.Second)
	assert.Less(t, waits[0], 2300*time.Millisecond)
	assert.Contains(t, got, `"id":1`)
}

// recorder is a server that answers from a script and records the keys.
type recorder struct {
	mu     sync.Mutex
	keys   []string
	bodies []string
	script func(n int, w http.ResponseWriter, r *http.Request)
}

func (s *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, r.Header.Get(Header))
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	s.script(n, w, r)
}

func (s *recorder) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// failTimes answers 503 (with retry-after ra, if not "") n times, then 201.
func failTimes(n int, ra string) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i < n {
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
}

func TestSameKeyAcrossRetriesNewKeyPerCall(t *testing.T) {
	rec := &recorder{script: failTimes(2, "")}
	srv := serve(t, rec)
	tr, f := newFast(t)
	c := &http.Client{Transport: tr}
	resp, _ := post(t, c, t.Context(), srv.URL, `{"a":1}`)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.False(t, Replayed(resp))
	resp2, _ := post(t, c, t.Context(), srv.URL, `{"a":1}`)
	assert.Equal(t, http.StatusCreated, resp2.StatusCode)

	keys := rec.seen()
	require.Len(t, keys, 4)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, keys[0], keys[1])
	assert.Equal(t, keys[0], keys[2], "every retry of one call sends the same key")
	assert.NotEqual(t, keys[0], keys[3], "a new call gets a new key")
	assert.Equal(t, `"`+KeyOf(resp)+`"`, keys[0], "the key is sent as a Structured Field string")
	assert.Equal(t, []string{`{"a":1}`, `{"a":1}`, `{"a":1}`, `{"a":1}`}, rec.bodies, "the body is sent again on each attempt")
	for i, w := range f.all() {
		assert.Positive(t, w, "wait %d", i)
		assert.LessOrEqual(t, w, DefaultMinBackoff<<i, "wait %d: backoff doubles, jittered below", i)
	}
}

func TestStatuses(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		ra       string
		method   string
		keyed    bool // WithMethods includes the method
		attempts int  // the server sees this many, then the transport returns
		wait     time.Duration
	}{
		{"503 retry-after", 503, "2", "POST", true, 4, 2 * time.Second},
		{"429 retry-after", 429, "1", "POST", true, 4, time.Second},
		{"503 no retry-after backs off", 503, "", "POST", true, 4, 0},
		{"502 backs off", 502, "", "POST", true, 4, 0},
		{"409 with retry-after", 409, "1", "POST", true, 4, time.Second},
		{"409 without retry-after is final", 409, "", "POST", true, 1, 0},
		{"422 mismatch is final", 422, "", "POST", true, 1, 0},
		{"500 is final", 500, "", "POST", true, 1, 0},
		{"retry-after too long is final", 503, "3600", "POST", true, 1, 0},
		{"POST without key is sent once", 503, "1", "POST", false, 1, 0},
		{"GET without key is retried", 503, "1", "GET", false, 4, time.Second},
		{"409 on unkeyed GET is final", 409, "1", "GET", false, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{script: func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tc.ra != "" {
					w.Header().Set("Retry-After", tc.ra)
				}
				w.WriteHeader(tc.status)
			}}
			srv := serve(t, rec)
			opts := []Option{}
			if !tc.keyed {
				opts = append(opts, WithMethods())
			}
			tr, f := newFast(t, opts...)
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode, "the last answer is returned")
			assert.Len(t, rec.seen(), tc.attempts)
			waits := f.all()
			assert.Len(t, waits, tc.attempts-1)
			if tc.wait > 0 {
				for _, w := range waits {
					assert.GreaterOrEqual(t, w, tc.wait)
					assert.Less(t, w, tc.wait+tc.wait/10+time.Millisecond)
				}
			}
			if tc.keyed {
				assert.NotEmpty(t, rec.seen()[0])
			} else {
				assert.Empty(t, rec.seen()[0], "no key on a method that is not keyed")
			}
		})
	}
}

// hangUp is a server that reads the request, then closes the connection
// without answering, n times, then answers 201.
func hangUp(n int) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i < n {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Run("keyed POST is retried with its key", func(t *testing.T) {
		rec := &recorder{script: hangUp(2)}
		srv := serve(t, rec)
		tr, _ := newFast(t, WithBase(&http.Transport{DisableKeepAlives: true}))
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		keys := rec.seen()
		require.Len(t, keys, 3)
		assert.Equal(t, keys[0], keys[2])
	})
	t.Run("POST without key is not retried", func(t *testing.T) {
		rec := &recorder{script: hangUp(1)}
		srv := serve(t, rec)
		tr, f := newFast(t, WithMethods(), WithBase(&http.Transport{DisableKeepAlives: true}))
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
		_, err := tr.RoundTrip(req)
		require.Error(t, err)
		assert.Len(t, rec.seen(), 1)
		assert.Empty(t, f.all())
	})
	t.Run("gives up after the attempts", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close() // nothing listens: every dial is refused
		tr, f := newFast(t, WithMaxAttempts(3))
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr, strings.NewReader("x"))
		_, err = tr.RoundTrip(req)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "gave up after 3 attempts")
		var op *net.OpError
		assert.ErrorAs(t, err, &op, "the cause is wrapped")
		assert.Len(t, f.all(), 2)
	})
}

func TestBodyNotRewindableIsSentOnce(t *testing.T) {
	rec := &recorder{script: failTimes(1, "1")}
	srv := serve(t, rec)
	tr, _ := newFast(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("stream")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Len(t, rec.seen(), 1)
	assert.NotEmpty(t, rec.seen()[0], "it still carries a key")
}

func TestWithKey(t *testing.T) {
	rec := &recorder{script: func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }}
	srv := serve(t, rec)
	c := &http.Client{Transport: mustNew(t)}
	ctx := WithKey(t.Context(), `order"7"`)

	resp, _ := post(t, c, ctx, srv.URL, `{"amount":1}`)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, `order"7"`, KeyOf(resp))
	resp, _ = post(t, c, ctx, srv.URL, `{"amount":1}`)
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "the same request may be sent again with its key")
	assert.Equal(t, []string{`"order\"7\""`, `"order\"7\""`}, rec.seen())

	for name, mk := range map[string]func() *http.Request{
		"other body": func() *http.Request {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"amount":2}`))
			return r
		},
		"other URL": func() *http.Request {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/other", strings.NewReader(`{"amount":1}`))
			return r
		},
		"other method": func() *http.Request {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPatch, srv.URL, strings.NewReader(`{"amount":1}`))
			return r
		},
	} {
		_, err := c.Do(mk())
		assert.ErrorIs(t, err, ErrKeyReused, name)
	}
	assert.Len(t, rec.seen(), 2, "a refused request is not sent")

	for _, bad := range []string{"", strings.Repeat("k", MaxKeyLen+1), "tab\there", "é", "a b", " lead", "trail ", "null"} {
		req, _ := http.NewRequestWithContext(WithKey(t.Context(), bad), http.MethodPost, srv.URL, strings.NewReader("x"))
		_, err := c.Do(req)
		assert.ErrorIs(t, err, ErrInvalidKey, "%q", bad)
	}
	assert.Len(t, rec.seen(), 2, "an invalid key is not sent")
}

func TestCallerHeaderKept(t *testing.T) {
	rec := &recorder{script: failTimes(1, "")}
	srv := serve(t, rec)
	tr, _ := newFast(t)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, strings.NewReader("x"))
	req.Header.Set(Header, `"mine"`)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{`"mine"`, `"mine"`}, rec.seen())
	assert.Equal(t, "mine", KeyOf(resp))
	assert.Equal(t, `"mine"`, req.Header.Get(Header), "the caller's request is not modified")
}

func TestRequestNotModified(t *testing.T) {
	rec := &recorder{script: failTimes(0, "")}
	srv := serve(t, rec)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := mustNew(t).RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, req.Header.Get(Header))
	assert.NotEmpty(t, rec.seen()[0])
}

func TestContextCancelledDuringWait(t *testing.T) {
	rec := &recorder{script: failTimes(10, "20")}
	srv := serve(t, rec)
	ctx, cancel := context.WithCancel(t.Context())
	tr := mustNew(t)
	tr.policy.Sleep = func(c context.Context, d time.Duration) error {
		cancel()
		return retry.Sleep(c, d) // returns at once: ctx is done
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	start := time.Now()
	_, err := tr.RoundTrip(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Len(t, rec.seen(), 1)
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"-1", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, tc := range cases {
		got, ok := retryAfter(tc.in, now)
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := NewKey()
		require.NoError(t, validKey(k))
		require.Len(t, k, 36)
		require.False(t, seen[k])
		seen[k] = true
	}
}

func TestReplayed(t *testing.T) {
	assert.False(t, Replayed(nil))
	assert.True(t, Replayed(&http.Response{Header: http.Header{ReplayedHeader: {"true"}}}))
	assert.False(t, Replayed(&http.Response{Header: http.Header{}}))
	assert.Equal(t, "", KeyOf(nil))
	assert.True(t, errors.Is(fmt.Errorf("x: %w", ErrKeyReused), ErrKeyReused))
}

func TestWithKeyRedirect(t *testing.T) {
	rec := &recorder{script: func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}}
	srv := serve(t, rec)
	c := &http.Client{Transport: mustNew(t)}
	req, _ := http.NewRequestWithContext(WithKey(t.Context(), "k-redirect"), http.MethodPost, srv.URL+"/old", strings.NewReader("x"))
	_, err := c.Do(req)
	assert.ErrorIs(t, err, ErrKeyReused, "the key is not sent to another URL")
	assert.Equal(t, []string{`"k-redirect"`}, rec.seen())
}

func TestZeroTransport(t *testing.T) {
	rec := &recorder{script: failTimes(0, "")}
	srv := serve(t, rec)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := (&Transport{}).RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.NotEmpty(t, rec.seen()[0], "the zero Transport sends a key too")
}

func TestContextCancelledDuringBackoff(t *testing.T) {
	rec := &recorder{script: hangUp(10)}
	srv := serve(t, rec)
	ctx, cancel := context.WithCancel(t.Context())
	tr := mustNew(t, WithBase(&http.Transport{DisableKeepAlives: true}))
	tr.policy.Sleep = func(c context.Context, d time.Duration) error {
		cancel()
		return retry.Sleep(c, d)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, rec.seen(), 1)
}

// mustNew returns New(opts...), failing the test if it fails.
func mustNew(t testing.TB, opts ...Option) *Transport {
	t.Helper()
	tr, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestKeyRuleIsKeyers: the transport sends exactly the keys the server side
// (keyer.ParseValue, which httpidem uses) accepts in the form it sends them.
func TestKeyRuleIsKeyers(t *testing.T) {
	for _, key := range []string{"k", "a b", " lead", "trail ", "null", `q"uote`, `back\slash`, "é", "tab\t", strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen+1), "~!#$"} {
		_, serverErr := keyer.ParseValue(quote(key))
		clientErr := validKey(key)
		if (serverErr == nil) != (clientErr == nil) {
			t.Errorf("key %q: server says %v, client says %v", key, serverErr, clientErr)
		}
		if clientErr != nil && !errors.Is(clientErr, ErrInvalidKey) {
			t.Errorf("key %q: %v does not match ErrInvalidKey", key, clientErr)
		}
	}
}

func TestKeyFuncKeysAreChecked(t *testing.T) {
	rec := &recorder{script: func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }}
	srv := serve(t, rec)
	c := &http.Client{Transport: mustNew(t, WithKeyFunc(func() string { return "a b" }))}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
	_, err := c.Do(req)
	assert.ErrorIs(t, err, ErrInvalidKey)
	assert.Empty(t, rec.seen(), "an invalid key is not sent")
}

func TestOptionsRefuseBadValues(t *testing.T) {
	for name, opt := range map[string]Option{
		"nil option":                 nil,
		"WithMaxAttempts(0)":         WithMaxAttempts(0),
		"WithMaxAttempts(-1)":        WithMaxAttempts(-1),
		"WithBase(nil)":              WithBase(nil),
		"WithBackoff(0, 1s)":         WithBackoff(0, time.Second),
		"WithBackoff(2s, 1s)":        WithBackoff(2*time.Second, time.Second),
		"WithMaxRetryAfter(0)":       WithMaxRetryAfter(0),
		"WithKeyFunc(nil)":           WithKeyFunc(nil),
		`WithMethods("BAD METHOD")`:  WithMethods("BAD METHOD"),
		`WithMethods("")`:            WithMethods(""),
		`WithMethods("POST", "a/b")`: WithMethods("POST", "a/b"),
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := New(WithMaxAttempts(2), opt)
			assert.Nil(t, tr)
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorIs(t, err, store.ErrInvalid, "the one sentinel")
			assert.Equal(t, 1, strings.Count(err.Error(), "invalid argument"), "said once: %v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "idemclient: new: "), err.Error())
			c, err := NewClient(opt)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestWithMethodsCanonical(t *testing.T) {
	tr := mustNew(t, WithMethods("post", "Put"))
	assert.Equal(t, map[string]bool{"POST": true, "PUT": true}, tr.methods)
	assert.Empty(t, mustNew(t, WithMethods()).methods, "no method gets a key")
}

// TestLowerCaseMethodIsKeyed: a request whose method is spelt "post" is a
// POST to the transport, as to httpidem, so it gets a key.
func TestLowerCaseMethodIsKeyed(t *testing.T) {
	rec := &recorder{script: func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }}
	srv := serve(t, rec)
	c := &http.Client{Transport: mustNew(t)}
	req, _ := http.NewRequestWithContext(t.Context(), "post", srv.URL, strings.NewReader("x"))
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	seen := rec.seen()
	require.Len(t, seen, 1)
	assert.NotEmpty(t, seen[0], "the lower-case POST carries a key")
}
