package httpidem_test

import (
	"context"
	"io"
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
	"github.com/idemkit/idemkit/store"
)

// kindHook sends every event of one kind to a channel.
func kindHook(kind eventKind, ch chan<- event, ev *events) func(event) {
	return func(e event) {
		ev.hook(e)
		if e.Kind == kind {
			select {
			case ch <- e:
			default:
			}
		}
	}
}

func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	s := newFakeStore()
	const lease = 200 * time.Millisecond
	renewed := make(chan event, 10)
	var ev events
	dupStatus := make(chan int, 1)
	var mw http.Handler
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Dup") != "" {
			w.WriteHeader(201)
			return
		}
		start := time.Now()
		<-renewed
		<-renewed
		// Two renewals: the handler has run a whole lease (or more), yet the
		// key is still held, so a duplicate is refused rather than run.
		require.GreaterOrEqual(t, time.Since(start), lease-lease/4)
		dup := newReq(`{}`, "k")
		dup.Header.Set("X-Dup", "1")
		dupStatus <- serve(mw, dup).Code
		w.WriteHeader(201)
		io.WriteString(w, "done")
	})
	mw = mustNew(t, s, idem.WithLease(lease), (func(event))(kindHook(evRenewed, renewed, &ev)))(h)
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 201, w.Code)
	assert.Equal(t, http.StatusConflict, <-dupStatus)
	rec, err := s.Get(context.Background(), mustScoped(t, "k"))
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, rec.Status)
	// The renewer is stopped: no renewal after the response.
	var claims, renews int
	s.set(func(f *fakeStore) { claims, renews = f.claims, f.renews })
	assert.Positive(t, renews, "renewed with Store.Renew")
	assert.Equal(t, "true", serve(mw, newReq(`{}`, "k")).Header().Get(httpidem.ReplayedHeader))
	time.Sleep(lease) // a renewal would be due by now: the real clock is the subject
	s.set(func(f *fakeStore) {
		assert.Equal(t, claims+1, f.claims)
		assert.Equal(t, renews, f.renews, "no renewal after the response")
	})
}

func TestLeaseLostCancelsHandler(t *testing.T) {
	tests := []struct {
		name       string
		breakStore func(f *fakeStore)
		kinds      []eventKind
	}{
		{"taken over", func(f *fakeStore) { f.renewLose = true }, []eventKind{evLeaseLost}},
		{"renewal keeps failing", func(f *fakeStore) { f.claimErr = errDown }, []eventKind{evStoreError, evLeaseLost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeStore()
			var ev events
			cause := make(chan error, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.set(tt.breakStore)
				<-r.Context().Done()
				cause <- context.Cause(r.Context())
				w.WriteHeader(201) // too late: the lease is gone
			})
			mw := mustNew(t, s, idem.WithLease(80*time.Millisecond), (func(event))(ev.hook))(h)
			w := serve(mw, newReq(`{}`, "k"))
			assert.Equal(t, 201, w.Code)
			assert.ErrorIs(t, <-cause, store.ErrLeaseLost)
			kinds := ev.kinds()
			require.NotEmpty(t, kinds)
			assert.Equal(t, tt.kinds[0], kinds[0])
			assert.Contains(t, kinds, evLeaseLost)
			assert.NotContains(t, kinds, evStored)
			s.set(func(f *fakeStore) {
				r, ok := f.recs[mustScoped(t, "k")]
				assert.True(t, !ok || r.Status != store.StatusCompleted, "a response after a lost lease is not kept")
			})
		})
	}
}

func TestOtherFingerprintVersion(t *testing.T) {
	// A record written under another fingerprint algorithm cannot be
	// compared, so it is trusted, not answered with 422.
	s := newFakeStore()
	key := mustScoped(t, "k")
	ctx := context.Background()
	_, err := s.Claim(ctx, key, "v0:abc", "old", time.Minute)
	require.NoError(t, err)
	h := &counting{}
	mw := mustNew(t, s)(h)
	requireProblem(t, serve(mw, newReq(`{}`, "k")), 409, httpidem.CodeInProgress)
	require.NoError(t, s.Complete(ctx, key, "old", replayBytes(t), time.Hour))
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 202, w.Code)
	assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
	assert.EqualValues(t, 0, h.runs.Load())
	// Same version, other hash: a real mismatch.
	_, err = s.Claim(ctx, mustScoped(t, "k2"), "v1:abc", "old", time.Minute)
	require.NoError(t, err)
	requireProblem(t, serve(mw, newReq(`{}`, "k2")), 422, httpidem.CodeKeyMismatch)
}

// replayBytes produces a stored response by running the middleware once.
func replayBytes(t *testing.T) []byte {
	t.Helper()
	s := newFakeStore()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	serve(mustNew(t, s)(h), newReq(`{}`, "src"))
	rec, err := s.Get(context.Background(), mustScoped(t, "src"))
	require.NoError(t, err)
	return rec.Response
}

func TestCorruptStoredResponse(t *testing.T) {
	s := newFakeStore()
	key := mustScoped(t, "k")
	ctx := context.Background()
	_, err := s.Claim(ctx, key, fpOf(t, `{}`), "t", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, key, "t", []byte{9, 9, 9}, time.Hour))
	requireProblem(t, serve(mustNew(t, s)(&counting{}), newReq(`{}`, "k")), 500, httpidem.CodeStoredResponse)
}

func TestNewRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		s    store.Store
		opts []any
	}{
		"zero lease":                    {newFakeStore(), []any{idem.WithLease(0)}},
		"negative retention":            {newFakeStore(), []any{idem.WithRetention(-time.Second)}},
		"negative wait":                 {newFakeStore(), []any{idem.WithWait(-time.Second)}},
		"nil logger":                    {newFakeStore(), []any{idem.WithLogger(nil)}},
		"zero max response":             {newFakeStore(), []any{httpidem.WithMaxResponse(0)}},
		"nil keep":                      {newFakeStore(), []any{httpidem.WithKeep(nil)}},
		"nil scope":                     {newFakeStore(), []any{httpidem.WithScope(nil)}},
		"nil fingerprinter":             {newFakeStore(), []any{httpidem.WithFingerprinter(nil)}},
		"nil clock":                     {newFakeStore(), []any{httpidem.WithClock(nil)}},
		"nil option":                    {newFakeStore(), []any{httpidem.Option(nil)}},
		"no methods":                    {newFakeStore(), []any{httpidem.WithMethods()}},
		"empty method":                  {newFakeStore(), []any{httpidem.WithMethods("")}},
		"method not a token":            {newFakeStore(), []any{httpidem.WithMethods("BAD METHOD")}},
		"replay header not a token":     {newFakeStore(), []any{httpidem.WithReplayHeaders("bad header")}},
		"empty not-replayed header":     {newFakeStore(), []any{httpidem.WithoutReplayHeaders("")}},
		"no not-replayed headers":       {newFakeStore(), []any{httpidem.WithoutReplayHeaders()}},
		"transactions on a plain store": {newFakeStore(), []any{httpidem.WithTransactions()}},
	} {
		t.Run(name, func(t *testing.T) {
			mw, err := newMW(tc.s, tc.opts...)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, mw)
			assert.Equal(t, 1, strings.Count(err.Error(), "new:"), "each layer says itself once: %s", err)
		})
	}
	mw, err := httpidem.New(nil)
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.Nil(t, mw)
}

func TestStreamingLeaseMode(t *testing.T) {
	// Lease mode tees: the client sees flushed parts as they are written.
	s := newFakeStore()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, "part1,")
		require.NoError(t, http.NewResponseController(w).Flush())
		io.WriteString(w, "part2")
	})
	srv := httptest.NewServer(mustNew(t, s)(h))
	t.Cleanup(srv.Close)
	for i, replayed := range []string{"", "true"} {
		req, err := http.NewRequest("POST", srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "stream")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "part1,part2", string(body), "request %d", i)
		assert.Equal(t, replayed, resp.Header.Get(httpidem.ReplayedHeader))
	}
}

func TestTxSlowHandlerRenewsBeforeComplete(t *testing.T) {
	// In a transaction the lease is not renewed while the handler runs; a
	// handler slower than the lease still completes, because the middleware
	// renews the lease once before Complete.
	s := newFakeTxStore()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.now = clock
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now = now.Add(3 * time.Second) // longer than the 2s lease
		mu.Unlock()
		if l, ok := ledgerFrom(r.Context()); ok {
			l.Add("slow payment")
		}
		w.WriteHeader(201)
	})
	mw := mustNew(t, s, idem.WithLease(2*time.Second), httpidem.WithClock(clock))(h)
	require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
	assert.Equal(t, []string{"slow payment"}, s.committed())
	assert.Equal(t, "true", serve(mw, newReq(`{}`, "k")).Header().Get(httpidem.ReplayedHeader))
}

// TestSlowClaimDoesNotRunHandler: a claim whose round trip takes half the
// lease or more may return a lease that has already lapsed (a slow store);
// the handler must not run on it, or a retry could run it a second time.
func TestSlowClaimDoesNotRunHandler(t *testing.T) {
	const lease = 40 * time.Millisecond
	s := newFakeStore()
	slow := true
	s.onClaim = func(string, store.Token) {
		if slow {
			time.Sleep(lease / 2) // the store is the slow subject here
		}
	}
	ran := 0
	var ev events
	mw := mustNew(t, s, idem.WithLease(lease), (func(event))(ev.hook))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.WriteHeader(201)
	}))
	w := serve(mw, newReq(`{}`, "k"))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), httpidem.CodeStoreUnavailable)
	assert.Zero(t, ran, "the handler did not run on a lease that may have lapsed")
	_, err := s.Get(context.Background(), mustScoped(t, "k"))
	assert.ErrorIs(t, err, store.ErrNotFound, "the key was released")
	assert.Equal(t, []eventKind{evReleased, evStoreError}, ev.kinds())

	slow = false
	w = serve(mw, newReq(`{}`, "k"))
	assert.Equal(t, 201, w.Code)
	assert.Equal(t, 1, ran)
}
