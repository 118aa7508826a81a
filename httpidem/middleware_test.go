package httpidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// events collects what the middleware reports.
type events struct {
	mu   sync.Mutex
	list []event
}

func (e *events) hook(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) kinds() []eventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ks []eventKind
	for _, ev := range e.list {
		if ev.Kind != evRenewed {
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

func (e *events) last() event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list[len(e.list)-1]
}

// newReq builds a POST /payments with the body and one Idempotency-Key
// header per key given (none when no key is given).
func newReq(body string, keys ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		r.Header.Add("Idempotency-Key", k)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// counting answers 201 with a body that counts its own runs, and headers that
// must or must not be replayed.
type counting struct {
	runs   atomic.Int32
	status int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", "/payments/"+strconv.Itoa(int(n)))
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Request-Id", "req-"+strconv.Itoa(int(n)))
	h.Set("Date", "Mon, 30 Nov 2026 00:00:00 GMT")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	status := c.status
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	io.WriteString(w, `{"run":`+strconv.Itoa(int(n))+`,"echo":`+strconv.Quote(string(body))+`}`)
}

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

func requireProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) problemBody {
	t.Helper()
	require.Equal(t, status, w.Code, "body: %s", w.Body.String())
	require.Equal(t, httpidem.ProblemContentType, w.Header().Get("Content-Type"))
	var p problemBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "problem body %q", w.Body.String())
	assert.Equal(t, status, p.Status)
	assert.Equal(t, code, p.Code)
	assert.Equal(t, "about:blank", p.Type)
	assert.Equal(t, http.StatusText(status), p.Title)
	assert.NotEmpty(t, p.Detail)
	assert.Empty(t, w.Header().Get(httpidem.ReplayedHeader))
	return p
}

// modes runs a test in lease mode (the fake store) and in transactional mode
// (the fake Transactor): the fake's knobs make stores fail on demand.
func modes(t *testing.T, f func(t *testing.T, s store.Store)) {
	t.Run("lease", func(t *testing.T) { f(t, newFakeStore()) })
	t.Run("tx", func(t *testing.T) { f(t, newFakeTxStore()) })
}

// allStores adds store/memory to modes.
func allStores(t *testing.T, f func(t *testing.T, s store.Store)) {
	modes(t, f)
	t.Run("memory", func(t *testing.T) {
		m := mustMemory(t)
		t.Cleanup(func() { m.Close() })
		f(t, m)
	})
}

func TestSingleRequestStatuses(t *testing.T) {
	long := strings.Repeat("k", 256)
	tests := []struct {
		name   string
		opts   []any
		req    func() *http.Request
		status int
		code   string // problem code; "" means the handler answered
		runs   int32
	}{
		{"no key", nil, func() *http.Request { return newReq(`{}`) }, 400, httpidem.CodeKeyMissing, 0},
		{"empty key", nil, func() *http.Request { return newReq(`{}`, "") }, 400, httpidem.CodeKeyMalformed, 0},
		{"whitespace key", nil, func() *http.Request { return newReq(`{}`, "   ") }, 400, httpidem.CodeKeyMalformed, 0},
		{"null key", nil, func() *http.Request { return newReq(`{}`, "null") }, 400, httpidem.CodeKeyMalformed, 0},
		{"quoted null key", nil, func() *http.Request { return newReq(`{}`, `"null"`) }, 400, httpidem.CodeKeyMalformed, 0},
		{"two keys", nil, func() *http.Request { return newReq(`{}`, "a", "b") }, 400, httpidem.CodeKeyMalformed, 0},
		{"key too long", nil, func() *http.Request { return newReq(`{}`, long) }, 400, httpidem.CodeKeyMalformed, 0},
		{"unterminated string", nil, func() *http.Request { return newReq(`{}`, `"abc`) }, 400, httpidem.CodeKeyMalformed, 0},
		{"body too large", []any{httpidem.WithFingerprinter(mustFP(t, keyer.WithMaxBody(8)))},
			func() *http.Request { return newReq(`{"amount":1990}`, "k") }, 413, httpidem.CodeBodyTooLarge, 0},
		{"optional key absent", []any{httpidem.WithOptionalKey()}, func() *http.Request { return newReq(`{}`) }, 201, "", 1},
		{"optional key malformed", []any{httpidem.WithOptionalKey()}, func() *http.Request { return newReq(`{}`, "a b") }, 400, httpidem.CodeKeyMalformed, 0},
		{"GET passes", nil, func() *http.Request { return httptest.NewRequest("GET", "/payments", nil) }, 201, "", 1},
		{"PUT passes by default", nil, func() *http.Request { return httptest.NewRequest("PUT", "/payments", nil) }, 201, "", 1},
		{"PATCH needs a key", nil, func() *http.Request { return httptest.NewRequest("PATCH", "/payments", nil) }, 400, httpidem.CodeKeyMissing, 0},
		{"WithMethods PUT", []any{httpidem.WithMethods("PUT")}, func() *http.Request { return httptest.NewRequest("PUT", "/payments", nil) }, 400, httpidem.CodeKeyMissing, 0},
		{"scope error", []any{httpidem.WithScope(func(*http.Request) ([]string, error) { return nil, errors.New("no session store") })},
			func() *http.Request { return newReq(`{}`, "k") }, 500, httpidem.CodeScope, 0},
		{"unauthenticated", []any{httpidem.WithScope(func(*http.Request) ([]string, error) { return nil, httpidem.ErrUnauthenticated })},
			func() *http.Request { return newReq(`{}`, "k") }, 401, httpidem.CodeScope, 0},
		{"scope too long", []any{httpidem.WithScope(func(*http.Request) ([]string, error) { return []string{strings.Repeat("u", 800)}, nil })},
			func() *http.Request { return newReq(`{}`, "k") }, 500, httpidem.CodeScope, 0},
		{"first request", nil, func() *http.Request { return newReq(`{}`, "k") }, 201, "", 1},
		{"bare and quoted", nil, func() *http.Request { return newReq(`{}`, `"k"`) }, 201, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allStores(t, func(t *testing.T, s store.Store) {
				h := &counting{}
				w := serve(mustNew(t, s, tt.opts...)(h), tt.req())
				if tt.code != "" {
					requireProblem(t, w, tt.status, tt.code)
				} else {
					require.Equal(t, tt.status, w.Code)
				}
				assert.Equal(t, tt.runs, h.runs.Load(), "handler runs")
			})
		})
	}
}

func TestReplay(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		var ev events
		h := &counting{}
		mw := mustNew(t, s, (func(event))(ev.hook))(h)
		first := serve(mw, newReq(`{"amount":1990}`, "k1"))
		require.Equal(t, 201, first.Code)
		require.Empty(t, first.Header().Get(httpidem.ReplayedHeader))
		require.Equal(t, "session=secret", first.Header().Get("Set-Cookie"), "the first response is the handler's own")

		for i := 0; i < 3; i++ {
			again := serve(mw, newReq(`{"amount":1990}`, `"k1"`))
			require.Equal(t, 201, again.Code)
			assert.Equal(t, "true", again.Header().Get(httpidem.ReplayedHeader))
			assert.Equal(t, first.Body.String(), again.Body.String(), "body byte for byte")
			assert.Equal(t, "application/json", again.Header().Get("Content-Type"))
			assert.Equal(t, "/payments/1", again.Header().Get("Location"))
			assert.Equal(t, []string{"a", "b"}, again.Header().Values("X-Multi"))
			assert.Empty(t, again.Header().Get("Set-Cookie"), "cookies are never replayed")
			assert.Empty(t, again.Header().Get("X-Request-Id"), "per-request ids are not replayed")
			assert.Empty(t, again.Header().Get("Date"), "Date is not replayed")
		}
		assert.EqualValues(t, 1, h.runs.Load())
		assert.Equal(t, []eventKind{evStored, evReplayed, evReplayed, evReplayed}, ev.kinds())
	})
}

func TestMismatch(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		var ev events
		h := &counting{}
		mw := mustNew(t, s, (func(event))(ev.hook))(h)
		require.Equal(t, 201, serve(mw, newReq(`{"amount":1990}`, "k1")).Code)
		requireProblem(t, serve(mw, newReq(`{"amount":9999}`, "k1")), 422, httpidem.CodeKeyMismatch)
		r := newReq(`{"amount":1990}`, "k1")
		r.URL.Path = "/refunds"
		requireProblem(t, serve(mw, r), 422, httpidem.CodeKeyMismatch)
		assert.EqualValues(t, 1, h.runs.Load())
		assert.Equal(t, evMismatch, ev.last().Kind)
		// A different key is a different request.
		require.Equal(t, 201, serve(mw, newReq(`{"amount":9999}`, "k2")).Code)
	})
}

func TestCanonicalJSONFingerprint(t *testing.T) {
	h := &counting{}
	mw := mustNew(t, newFakeStore(), httpidem.WithFingerprinter(mustFP(t, keyer.WithCanonicalJSON())))(h)
	require.Equal(t, 201, serve(mw, newReq(`{"amount":1990,"currency":"EUR"}`, "k")).Code)
	w := serve(mw, newReq(`{ "currency": "EUR", "amount": 1990 }`, "k"))
	require.Equal(t, 201, w.Code)
	require.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
	requireProblem(t, serve(mw, newReq(`{"currency":"EUR","amount":1990.0}`, "k")), 422, httpidem.CodeKeyMismatch)
}

func TestScopeSeparatesClients(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		h := &counting{}
		mw := mustNew(t, s, httpidem.WithScope(func(r *http.Request) ([]string, error) {
			return []string{r.Header.Get("X-User")}, nil
		}))(h)
		for _, user := range []string{"alice", "bob"} {
			r := newReq(`{"amount":1990}`, "same-key")
			r.Header.Set("X-User", user)
			w := serve(mw, r)
			require.Equal(t, 201, w.Code)
			require.Empty(t, w.Header().Get(httpidem.ReplayedHeader), "%s must not get another user's response", user)
		}
		assert.EqualValues(t, 2, h.runs.Load())
	})
}

func TestNotKeptStatusesRelease(t *testing.T) {
	for _, status := range []int{500, 502, 503, 429} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			allStores(t, func(t *testing.T, s store.Store) {
				var ev events
				h := &counting{status: status}
				mw := mustNew(t, s, (func(event))(ev.hook))(h)
				w := serve(mw, newReq(`{}`, "k"))
				require.Equal(t, status, w.Code, "the handler's own answer reaches the client")
				assert.Contains(t, w.Body.String(), `"run":1`)
				assert.Equal(t, evReleased, ev.last().Kind)
				h.status = 201
				w = serve(mw, newReq(`{}`, "k"))
				require.Equal(t, 201, w.Code)
				assert.Empty(t, w.Header().Get(httpidem.ReplayedHeader), "the retry really ran")
				assert.EqualValues(t, 2, h.runs.Load())
			})
		})
	}
	t.Run("4xx is kept", func(t *testing.T) {
		allStores(t, func(t *testing.T, s store.Store) {
			h := &counting{status: 400}
			mw := mustNew(t, s)(h)
			require.Equal(t, 400, serve(mw, newReq(`{}`, "k")).Code)
			w := serve(mw, newReq(`{}`, "k"))
			require.Equal(t, 400, w.Code)
			assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
		})
	})
	t.Run("WithKeep", func(t *testing.T) {
		allStores(t, func(t *testing.T, s store.Store) {
			h := &counting{status: 409}
			mw := mustNew(t, s, httpidem.WithKeep(func(st int) bool { return st < 300 }))(h)
			require.Equal(t, 409, serve(mw, newReq(`{}`, "k")).Code)
			require.Equal(t, 409, serve(mw, newReq(`{}`, "k")).Code)
			assert.EqualValues(t, 2, h.runs.Load())
		})
	})
}

func TestPanicReleasesAndRepanics(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		var ev events
		var runs atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l, ok := ledgerFrom(r.Context()); ok {
				l.Add("charge")
			}
			if runs.Add(1) == 1 {
				panic("boom")
			}
			w.WriteHeader(201)
		})
		mw := mustNew(t, s, (func(event))(ev.hook))(h)
		require.PanicsWithValue(t, "boom", func() { serve(mw, newReq(`{}`, "k")) })
		assert.Equal(t, evReleased, ev.last().Kind)
		assert.Contains(t, ev.last().Reason, "panic")
		if tx, ok := s.(*fakeTxStore); ok {
			assert.Empty(t, tx.committed(), "the panic rolled the effect back")
		}
		require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
		assert.EqualValues(t, 2, runs.Load())
		if tx, ok := s.(*fakeTxStore); ok {
			assert.Equal(t, []string{"charge"}, tx.committed())
		}
	})
}

func TestStoreUnavailable(t *testing.T) {
	modes(t, func(t *testing.T, s store.Store) {
		fs := fakeOf(s)
		fs.set(func(f *fakeStore) { f.claimErr = errDown })
		var ev events
		h := &counting{}
		w := serve(mustNew(t, s, (func(event))(ev.hook))(h), newReq(`{}`, "k"))
		requireProblem(t, w, 503, httpidem.CodeStoreUnavailable)
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
		assert.EqualValues(t, 0, h.runs.Load(), "fail closed: the handler did not run")
		assert.Equal(t, evStoreError, ev.last().Kind)
		assert.ErrorIs(t, ev.last().Err, errDown)

		w = serve(mustNew(t, s, httpidem.WithFailOpen())(h), newReq(`{}`, "k"))
		assert.Equal(t, 201, w.Code)
		assert.EqualValues(t, 1, h.runs.Load(), "fail open: the handler ran")
	})
}

func fakeOf(s store.Store) *fakeStore {
	if tx, ok := s.(*fakeTxStore); ok {
		return tx.fakeStore
	}
	return s.(*fakeStore)
}

func TestInProgressConflict(t *testing.T) {
	modes(t, func(t *testing.T, s store.Store) {
		if _, ok := s.(*fakeTxStore); ok {
			// In transactional mode a duplicate blocks on the transaction
			// instead; a 409 comes only from a lease held elsewhere.
			fakeOf(s).Claim(context.Background(), mustScoped(t, "k"), fpOf(t, `{}`), "other-token", 90*time.Second)
		}
		started, release := make(chan struct{}), make(chan struct{})
		var ev events
		now := time.Now()
		fakeOf(s).now = func() time.Time { return now }
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			w.WriteHeader(201)
		})
		mw := mustNew(t, s, (func(event))(ev.hook), idem.WithLease(90*time.Second), httpidem.WithClock(func() time.Time { return now.Add(20 * time.Second) }))(h)
		done := make(chan *httptest.ResponseRecorder, 1)
		if _, ok := s.(*fakeTxStore); !ok {
			go func() { done <- serve(mw, newReq(`{}`, "k")) }()
			<-started
		}
		w := serve(mw, newReq(`{}`, "k"))
		requireProblem(t, w, 409, httpidem.CodeInProgress)
		assert.Equal(t, "2", w.Header().Get("Retry-After"), "a short hint, never the lease's remaining 70s")
		assert.Equal(t, evConflict, ev.last().Kind)
		close(release)
		if _, ok := s.(*fakeTxStore); !ok {
			require.Equal(t, 201, (<-done).Code)
		}
	})
}

func mustScoped(t *testing.T, key string, scope ...string) string {
	t.Helper()
	k, err := keyer.ScopedKey(key, scope...)
	require.NoError(t, err)
	return k
}

func fpOf(t *testing.T, body string) string {
	t.Helper()
	fp, err := mustFP(t).Fingerprint(newReq(body, "k"))
	require.NoError(t, err)
	return fp
}

func TestWaitThenReplay(t *testing.T) {
	s := newFakeStore()
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(201)
		io.WriteString(w, "paid")
	})
	var claims atomic.Int32
	s.onClaim = func(string, store.Token) {
		if claims.Add(1) == 3 { // the first, and two polls of the waiter
			close(release)
		}
	}
	mw := mustNew(t, s, idem.WithWait(10*time.Second))(h)
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(mw, newReq(`{}`, "k")) }()
	<-started
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
	assert.Equal(t, "paid", w.Body.String())
	require.Equal(t, 201, (<-first).Code)
	assert.EqualValues(t, 1, runs.Load())
}

func TestWaitGivesUp(t *testing.T) {
	s := newFakeStore()
	_, err := s.Claim(context.Background(), mustScoped(t, "k"), fpOf(t, `{}`), "other", time.Minute)
	require.NoError(t, err)
	h := &counting{}
	start := time.Now()
	w := serve(mustNew(t, s, idem.WithWait(50*time.Millisecond))(h), newReq(`{}`, "k"))
	requireProblem(t, w, 409, httpidem.CodeInProgress)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.EqualValues(t, 0, h.runs.Load())
}

func TestWaitThenRunAfterRelease(t *testing.T) {
	s := newFakeStore()
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
	})
	var claims atomic.Int32
	s.onClaim = func(string, store.Token) {
		if claims.Add(1) == 2 {
			close(release)
		}
	}
	mw := mustNew(t, s, idem.WithWait(10*time.Second))(h)
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(mw, newReq(`{}`, "k")) }()
	<-started
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 201, w.Code, "the first was released (503), so the waiter ran the handler")
	assert.Empty(t, w.Header().Get(httpidem.ReplayedHeader))
	require.Equal(t, 503, (<-first).Code)
	assert.EqualValues(t, 2, runs.Load())
}

func TestParallelSameKey(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		var runs atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			if l, ok := ledgerFrom(r.Context()); ok {
				l.Add("payment")
			}
			w.WriteHeader(201)
			io.WriteString(w, `{"id":`+strconv.Itoa(int(n))+`}`)
		})
		mw := mustNew(t, s, idem.WithWait(10*time.Second))(h)
		var wg sync.WaitGroup
		results := make([]*httptest.ResponseRecorder, 10)
		for i := range results {
			wg.Go(func() { results[i] = serve(mw, newReq(`{"amount":1990}`, "k")) })
		}
		wg.Wait()
		for _, w := range results {
			require.Equal(t, 201, w.Code)
			require.Equal(t, `{"id":1}`, w.Body.String())
		}
		assert.EqualValues(t, 1, runs.Load())
		if tx, ok := s.(*fakeTxStore); ok {
			assert.Equal(t, []string{"payment"}, tx.committed())
		}
	})
}

func TestResponseTooLarge(t *testing.T) {
	big := strings.Repeat("x", 100)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l, ok := ledgerFrom(r.Context()); ok {
			l.Add("effect")
		}
		w.WriteHeader(201)
		io.WriteString(w, big)
	})
	t.Run("lease: sent, recorded without it, retry gets 410", func(t *testing.T) {
		var ev events
		var runs atomic.Int32
		counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1); h(w, r) })
		mw := mustNew(t, newFakeStore(), httpidem.WithMaxResponse(99), (func(event))(ev.hook))(counted)
		w := serve(mw, newReq(`{}`, "k"))
		require.Equal(t, 201, w.Code)
		require.Equal(t, big, w.Body.String())
		assert.Equal(t, evStoredWithoutResponse, ev.last().Kind)
		assert.Contains(t, ev.last().Reason, "over the 99-byte limit")
		w = serve(mw, newReq(`{}`, "k"))
		requireProblem(t, w, http.StatusGone, httpidem.CodeResponseNotKept)
		assert.EqualValues(t, 1, runs.Load(), "done is done: never a second run")
	})
	t.Run("lease: at the limit, kept", func(t *testing.T) {
		mw := mustNew(t, newFakeStore(), httpidem.WithMaxResponse(100))(h)
		serve(mw, newReq(`{}`, "k"))
		assert.Equal(t, "true", serve(mw, newReq(`{}`, "k")).Header().Get(httpidem.ReplayedHeader))
	})
	t.Run("tx: rolled back, 500", func(t *testing.T) {
		s := newFakeTxStore()
		mw := mustNew(t, s, httpidem.WithMaxResponse(99))(h)
		requireProblem(t, serve(mw, newReq(`{}`, "k")), 500, httpidem.CodeResponseTooLarge)
		assert.Empty(t, s.committed())
	})
}

func TestTransactional(t *testing.T) {
	t.Run("handler sees the transaction and commits with the key", func(t *testing.T) {
		s := newFakeTxStore()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l, ok := ledgerFrom(r.Context())
			if !ok {
				http.Error(w, "no transaction", 500)
				return
			}
			l.Add("payment")
			w.WriteHeader(201)
		})
		mw := mustNew(t, s)(h)
		require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
		require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
		assert.Equal(t, []string{"payment"}, s.committed())
		rec, err := s.Get(context.Background(), mustScoped(t, "k"))
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, rec.Status)
	})
	for _, fail := range []string{"complete", "commit"} {
		t.Run("a client never sees a success for a rolled-back transaction: "+fail, func(t *testing.T) {
			s := newFakeTxStore()
			s.set(func(f *fakeStore) {
				if fail == "complete" {
					f.completeErr = errDown
				}
			})
			if fail == "commit" {
				s.commitErr = errDown
			}
			var ev events
			h := &counting{}
			w := serve(mustNew(t, s, (func(event))(ev.hook))(h), newReq(`{}`, "k"))
			requireProblem(t, w, 503, httpidem.CodeStoreUnavailable)
			assert.NotContains(t, w.Body.String(), `"run"`)
			assert.EqualValues(t, 1, h.runs.Load())
			assert.Equal(t, evStoreError, ev.last().Kind)
			_, err := s.Get(context.Background(), mustScoped(t, "k"))
			assert.ErrorIs(t, err, store.ErrNotFound, "the claim rolled back too")
		})
	}
	t.Run("lease mode is the default, even on a Transactor", func(t *testing.T) {
		s := newFakeTxStore()
		var inTx bool
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, inTx = ledgerFrom(r.Context())
			w.WriteHeader(201)
		})
		e, err := idem.New(s)
		require.NoError(t, err)
		mw, err := httpidem.New(e)
		require.NoError(t, err)
		require.Equal(t, 201, serve(mw(h), newReq(`{}`, "k")).Code)
		assert.False(t, inTx)
	})
	t.Run("buffered: nothing reaches the client before the commit", func(t *testing.T) {
		s := newFakeTxStore()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Custom", "1")
			w.WriteHeader(202)
			io.WriteString(w, "part1,")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
		})
		w := serve(mustNew(t, s)(h), newReq(`{}`, "k"))
		assert.Equal(t, 202, w.Code)
		assert.Equal(t, "part1,part2", w.Body.String())
		assert.Equal(t, "1", w.Header().Get("X-Custom"))
	})
}

// TestClientHangUpWithNothingWrittenIsKept: the client went away and the
// handler returned without writing (an implicit 200). Its effect may have
// happened: the key is kept, and the retry replays instead of running again.
func TestClientHangUpWithNothingWrittenIsKept(t *testing.T) {
	for _, name := range []string{"fake", "memory"} {
		t.Run(name, func(t *testing.T) {
			var s store.Store = newFakeStore()
			if name == "memory" {
				m := mustMemory(t)
				t.Cleanup(func() { m.Close() })
				s = m
			}
			var runs atomic.Int32
			started := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					close(started)
					<-r.Context().Done() // the client went away; the handler returns
					return
				}
				w.WriteHeader(201)
			})
			mw := mustNew(t, s)(h)
			ctx, cancel := context.WithCancel(context.Background())
			r := newReq(`{}`, "k").WithContext(ctx)
			done := make(chan struct{})
			go func() { defer close(done); serve(mw, r) }()
			<-started
			cancel()
			<-done
			w := serve(mw, newReq(`{}`, "k"))
			require.Equal(t, 200, w.Code)
			assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
			assert.EqualValues(t, 1, runs.Load())
		})
	}
}

func TestSuccessKeptDespiteDisconnect(t *testing.T) {
	// Lease mode: the effect happened and a 201 was produced; the retry of a
	// client that did not hear it must replay, not charge again.
	s := newFakeStore()
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		cancel()
	})
	mw := mustNew(t, s)(h)
	serve(mw, newReq(`{}`, "k").WithContext(ctx))
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
}

func TestReplayHeaderOptions(t *testing.T) {
	tests := []struct {
		name        string
		opt         httpidem.Option
		kept, unset []string
	}{
		{"allowlist", httpidem.WithReplayHeaders("location", "Set-Cookie"), []string{"Location"}, []string{"Content-Type", "X-Multi", "Set-Cookie"}},
		{"empty allowlist", httpidem.WithReplayHeaders(), nil, []string{"Location", "Content-Type", "X-Multi"}},
		{"denylist", httpidem.WithoutReplayHeaders("x-multi"), []string{"Location", "Content-Type"}, []string{"X-Multi", "Set-Cookie", "X-Request-Id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw := mustNew(t, newFakeStore(), tt.opt)(&counting{})
			serve(mw, newReq(`{}`, "k"))
			w := serve(mw, newReq(`{}`, "k"))
			require.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
			for _, h := range tt.kept {
				assert.NotEmpty(t, w.Header().Get(h), h)
			}
			for _, h := range tt.unset {
				assert.Empty(t, w.Header().Get(h), h)
			}
		})
	}
}

// mustFP returns keyer.NewFingerprinter(opts...), failing the test if it
// fails.
func mustFP(t testing.TB, opts ...keyer.FingerprintOption) *keyer.Fingerprinter {
	t.Helper()
	f, err := keyer.NewFingerprinter(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
