// Package brokenidem is a small idempotency middleware, correct by default,
// that can be broken one httpidemtest rule at a time, and a payments app
// behind it. The tests of httpidemtest and cmd/idemcheck use it to prove
// that each rule fails when its promise is broken, and the others do not.
package brokenidem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/keyer"
)

// Breaks lists the rules the middleware can break (Options.Break), each by
// its httpidemtest name.
var Breaks = []string{
	"keys/missing",              // runs the handler without a key
	"keys/malformed",            // takes any field value as the key
	"keys/too-long",             // accepts keys up to 1024 characters
	"replay/identical",          // drops the Location header from replays
	"replay/marker",             // no Idempotent-Replayed on replays
	"mismatch/422",              // the fingerprint ignores the body
	"mismatch/not-poisoned",     // a mismatch forgets the key
	"errors/problem-json",       // errors are text/plain
	"inflight/conflict-or-wait", // a waiting duplicate runs the handler when its wait ends
	"inflight/retry-after",      // 409 with Retry-After: 30 (the lease)
	"notkept/5xx",               // keeps 5xx answers
	"notkept/429",               // keeps 429 answers
	"concurrency/burst",         // checks the key, then claims it 50 ms later
	"faults/lost-reply",         // releases the key when the client hangs up within 100 ms of the answer
	"faults/restart",            // keeps keys in the middleware's memory only
	"limits/body-at-limit",      // refuses bodies of MaxBody bytes
	"limits/body-over-limit",    // runs the handler unprotected for bodies over MaxBody
	"scope/separate",            // ignores the scope
}

// Options configures the middleware.
type Options struct {
	// Break is the rule to break (one of Breaks), or "" for none.
	Break string
	// MaxBody is the request-body limit (64 KiB when zero).
	MaxBody int
	// Wait is how long a duplicate in flight waits for the first before a
	// 409; zero answers 409 at once.
	Wait time.Duration
	// ScopeHeader names the header whose value scopes keys ("X-Tenant"
	// when empty).
	ScopeHeader string
}

type record struct {
	fp     string
	done   chan struct{} // closed once settled
	kept   bool
	status int
	header http.Header
	body   []byte
}

// records are the keys, shared by the middlewares an App builds unless the
// restart rule is broken.
type records struct {
	mu sync.Mutex
	m  map[string]*record
}

type middleware struct {
	Options
	recs *records
	next http.Handler
}

func (m *middleware) broken(rule string) bool { return m.Break == rule }

func (m *middleware) problem(w http.ResponseWriter, status int, detail string, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if m.broken("errors/problem-json") {
		http.Error(w, detail, status)
		return
	}
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(b)
}

// key returns the request's key, or writes the answer and returns false.
func (m *middleware) key(w http.ResponseWriter, r *http.Request) (string, bool) {
	vals := r.Header.Values("Idempotency-Key")
	key, err := keyer.Parse(r.Header)
	var ke *keyer.KeyError
	switch {
	case err == nil:
		return key, true
	case errors.Is(err, keyer.ErrNoKey):
		if m.broken("keys/missing") {
			m.next.ServeHTTP(w, r)
			return "", false
		}
		m.problem(w, http.StatusBadRequest, "an Idempotency-Key is required", "")
		return "", false
	case m.broken("keys/malformed") && !(errors.As(err, &ke) && ke.Reason == keyer.ReasonTooLong):
		return strings.Join(vals, ","), true
	case m.broken("keys/too-long") && errors.As(err, &ke) && ke.Reason == keyer.ReasonTooLong && len(vals[0]) <= 1026:
		return strings.Trim(vals[0], `"`), true
	}
	m.problem(w, http.StatusBadRequest, err.Error(), "")
	return "", false
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		m.next.ServeHTTP(w, r)
		return
	}
	key, ok := m.key(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(m.MaxBody)+1))
	if err != nil {
		m.problem(w, http.StatusBadRequest, "unreadable body", "")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case len(body) > m.MaxBody && m.broken("limits/body-over-limit"):
		m.next.ServeHTTP(w, r)
		return
	case len(body) > m.MaxBody, len(body) == m.MaxBody && m.broken("limits/body-at-limit"):
		m.problem(w, http.StatusRequestEntityTooLarge, "body too large", "")
		return
	}
	scope := r.Header.Get(m.ScopeHeader)
	if m.broken("scope/separate") {
		scope = ""
	}
	skey := strconv.Quote(scope) + " " + key
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	if !m.broken("mismatch/422") {
		h.Write(body)
	}
	fp := fmt.Sprintf("%x", h.Sum(nil))
	rec, ok := m.claim(w, skey, fp)
	if !ok {
		return
	}
	rw := &recorder{w: w, status: http.StatusOK}
	m.next.ServeHTTP(rw, r)
	if m.broken("faults/lost-reply") {
		// "Did the client get it?": a hang-up soon after the answer is
		// taken for "no", and the key released. Wrong: it may have.
		http.NewResponseController(w).Flush()
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-r.Context().Done():
			t.Stop()
			m.settle(skey, rec, nil)
			return
		case <-t.C:
		}
	}
	keep := rw.status < 500 && rw.status != http.StatusTooManyRequests ||
		rw.status >= 500 && m.broken("notkept/5xx") || rw.status == http.StatusTooManyRequests && m.broken("notkept/429")
	if !keep {
		m.settle(skey, rec, nil)
		return
	}
	m.settle(skey, rec, rw)
}

// claim claims skey, or answers a replay, a mismatch or a conflict and
// returns false.
func (m *middleware) claim(w http.ResponseWriter, skey, fp string) (*record, bool) {
	m.recs.mu.Lock()
	rec := m.recs.m[skey]
	if rec == nil {
		rec = &record{fp: fp, done: make(chan struct{})}
		if m.broken("concurrency/burst") {
			m.recs.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the gap between the check and the write
			m.recs.mu.Lock()
		}
		m.recs.m[skey] = rec
		m.recs.mu.Unlock()
		return rec, true
	}
	m.recs.mu.Unlock()
	if rec.fp != fp {
		if m.broken("mismatch/not-poisoned") {
			m.recs.mu.Lock()
			delete(m.recs.m, skey)
			m.recs.mu.Unlock()
		}
		m.problem(w, http.StatusUnprocessableEntity, "the key was used with another request", "")
		return nil, false
	}
	select {
	case <-rec.done:
	default:
		if m.Wait > 0 {
			t := time.NewTimer(m.Wait)
			defer t.Stop()
			select {
			case <-rec.done:
				if !rec.kept {
					return m.claim(w, skey, fp)
				}
				m.replay(w, rec)
				return nil, false
			case <-t.C:
				if m.broken("inflight/conflict-or-wait") {
					return &record{fp: fp, done: make(chan struct{})}, true // run it anyway, unrecorded
				}
			}
		}
		ra := "1"
		if m.broken("inflight/retry-after") {
			ra = "30"
		}
		m.problem(w, http.StatusConflict, "a request with this key is in flight", ra)
		return nil, false
	}
	if !rec.kept { // released meanwhile: claim it afresh
		return m.claim(w, skey, fp)
	}
	m.replay(w, rec)
	return nil, false
}

// settle keeps the answer (rw) or releases the key (nil).
func (m *middleware) settle(skey string, rec *record, rw *recorder) {
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	if rw != nil {
		rec.kept, rec.status, rec.header, rec.body = true, rw.status, rw.w.Header().Clone(), rw.body.Bytes()
	} else if m.recs.m[skey] == rec {
		delete(m.recs.m, skey)
	}
	select {
	case <-rec.done:
	default:
		close(rec.done)
	}
}

func (m *middleware) replay(w http.ResponseWriter, rec *record) {
	for k, vs := range rec.header {
		if k == "Date" || (k == "Location" && m.broken("replay/identical")) {
			continue
		}
		w.Header()[k] = vs
	}
	if !m.broken("replay/marker") {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body)
}

type recorder struct {
	w      http.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.w.Header() }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
		r.w.WriteHeader(code)
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body.Write(p)
	return r.w.Write(p)
}

// App is POST /payments behind the middleware and GET /payments listing the
// payments, with an httpidemtest.Control in the handler.
type App struct {
	Options
	// Delay is the handler's latency after a payment is made.
	Delay   time.Duration
	Control httpidemtest.Control

	mu       sync.Mutex
	payments []int
	recs     *records
	current  atomic.Pointer[http.Handler]
}

// NewApp returns the app with its middleware built.
func NewApp(o Options) *App {
	if o.MaxBody == 0 {
		o.MaxBody = 64 << 10
	}
	if o.ScopeHeader == "" {
		o.ScopeHeader = "X-Tenant"
	}
	a := &App{Options: o, recs: &records{m: map[string]*record{}}}
	a.build()
	return a
}

func (a *App) build() {
	recs := a.recs
	if a.Break == "faults/restart" {
		recs = &records{m: map[string]*record{}}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", &middleware{Options: a.Options, recs: recs, next: http.HandlerFunc(a.create)})
	mux.HandleFunc("GET /payments", a.list)
	var h http.Handler = mux
	a.current.Store(&h)
}

// Restart builds the middleware again, as a restarted process would.
func (a *App) Restart(context.Context) error {
	a.build()
	return nil
}

// ServeHTTP serves the app.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*a.current.Load()).ServeHTTP(w, r) }

// Count returns the number of payments made.
func (a *App) Count(context.Context) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.payments), nil
}

func (a *App) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount int `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if status := a.Control.Enter(r.Context()); status != 0 {
		http.Error(w, "failing on purpose", status)
		return
	}
	a.mu.Lock()
	a.payments = append(a.payments, req.Amount)
	id := len(a.payments)
	a.mu.Unlock()
	if a.Delay > 0 {
		t := time.NewTimer(a.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	b := fmt.Appendf(nil, `{"id":%d,"amount":%d}`+"\n", id, req.Amount)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Location", "/payments/"+strconv.Itoa(id))
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

func (a *App) list(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	b, _ := json.Marshal(a.payments)
	a.mu.Unlock()
	if string(b) == "null" {
		b = []byte("[]")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// Target is the app as an in-process httpidemtest target with every
// capability: Hold, Fail, Restart, MaxBody, two scopes.
func (a *App) Target() httpidemtest.Target {
	return httpidemtest.Target{
		Handler:   a,
		Path:      "/payments",
		Body:      func() []byte { return []byte(`{"amount":1990}`) },
		OtherBody: func() []byte { return []byte(`{"amount":5}`) },
		Count:     a.Count,
		Hold:      a.Control.Hold,
		Fail:      a.Control.Fail,
		Restart:   a.Restart,
		MaxBody:   a.MaxBody,
		Scopes:    []http.Header{{a.ScopeHeader: {"alice"}}, {a.ScopeHeader: {"bob"}}},
	}
}
