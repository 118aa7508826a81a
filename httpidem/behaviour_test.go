package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/redacttest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/postgres"
)

// TestWithMethodsLowerCase: WithMethods("post") protects POST (compared in
// upper case, as idemclient compares), and a request sent as "post" too.
func TestWithMethodsLowerCase(t *testing.T) {
	h := &counting{status: 201}
	mw := mustNew(t, newFakeStore(), httpidem.WithMethods("post"))(h)
	requireProblem(t, serve(mw, newReq(`{}`)), 400, httpidem.CodeKeyMissing)
	for range 2 {
		require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
	}
	assert.EqualValues(t, 1, h.runs.Load(), "two POSTs with one key ran the handler once")
	lower := func(keys ...string) *http.Request {
		r := newReq(`{}`, keys...)
		r.Method = "post"
		return r
	}
	requireProblem(t, serve(mw, lower()), 400, httpidem.CodeKeyMissing)
	for range 2 {
		require.Equal(t, 201, serve(mw, lower("k2")).Code)
	}
	assert.EqualValues(t, 2, h.runs.Load(), "a request sent as \"post\" is protected too")
}

// completeFails refuses every Complete; renewals go through.
type completeFails struct{ store.Store }

func (completeFails) Complete(context.Context, string, store.Token, []byte, time.Duration) error {
	return errors.New("test: the store refuses Complete")
}

// TestAnswerFlushedBeforeSettle: while every Complete fails (the engine
// retries for four leases), the client has its whole answer within 50 ms
// of the handler's return.
func TestAnswerFlushedBeforeSettle(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler func(w http.ResponseWriter)
	}{
		{"small body", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":1}`)
		}},
		{"body over the held start", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "10000")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, strings.Repeat("x", 10000))
		}},
		{"nothing written", func(http.ResponseWriter) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := memory.New()
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			e, err := idem.New(completeFails{st}, idem.WithLease(100*time.Millisecond), idem.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			mw, err := httpidem.New(e)
			require.NoError(t, err)
			returned := make(chan time.Time, 1)
			served := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(served)
				mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					c.handler(w)
					returned <- time.Now()
				})).ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			a := postKey(t, srv.URL, "k-flush")
			got := time.Now()
			back := <-returned
			assert.Less(t, got.Sub(back), 50*time.Millisecond, "the answer waited for the settle")
			assert.NotEqual(t, 0, a.status)
			select {
			case <-served:
				t.Fatal("the settle ended before the client had its answer; the test proves nothing")
			default:
			}
			<-served // the engine gives up after four leases
		})
	}
}

// TestHangUpAfterWorkKeptInBothModes: a client that hangs up after the
// handler did its work, before the answer, changes nothing: the response
// is kept (in transactional mode the commit runs on a detached context),
// no ERROR is logged, and a retry replays it.
func TestHangUpAfterWorkKeptInBothModes(t *testing.T) {
	for _, rs := range realStores[:2] { // memory (lease mode), sqlite (transactional)
		t.Run(rs.name, func(t *testing.T) {
			st := rs.open(t)
			var logs redacttest.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			e, err := idem.New(st, idem.WithLogger(logger))
			require.NoError(t, err)
			mw, err := httpidem.New(e, httpidem.WithTransactionsIfSupported())
			require.NoError(t, err)
			var runs atomic.Int32
			did := make(chan struct{}, 1)
			served := make(chan struct{}, 2)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { served <- struct{}{} }()
				mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := runs.Add(1)
					if n == 1 {
						did <- struct{}{}    // the effect happened
						<-r.Context().Done() // the client hangs up
					}
					w.WriteHeader(http.StatusCreated)
					fmt.Fprintf(w, `{"run":%d}`, n)
				})).ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithCancel(t.Context())
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"amount":1990}`))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", `"k-hangup"`)
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			<-did
			cancel()
			require.Error(t, <-errc)
			<-served
			a := postKey(t, srv.URL, "k-hangup")
			assert.Equal(t, http.StatusCreated, a.status)
			assert.True(t, a.replayed, "the retry replays the response the hung-up client never read")
			assert.Equal(t, `{"run":1}`, a.body)
			assert.EqualValues(t, 1, runs.Load())
			assert.NotContains(t, logs.String(), "level=ERROR")
		})
	}
}

// TestOneHandlerBothModes: one handler, written with postgres.Querier and
// WithTransactionsIfSupported, runs transactionally on a PostgreSQL store
// (a 5xx rolls its insert back) and in lease mode on memory:// (the insert
// went to the pool; the key is released either way).
func TestOneHandlerBothModes(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), testenv.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	payments := "httpidem_payments_" + suffix()
	_, err = pool.Exec(t.Context(), "CREATE TABLE "+payments+" (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL)")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+payments) })

	// The handler under test: what a user writes once.
	createPayment := func(w http.ResponseWriter, r *http.Request) {
		q := postgres.Querier(r.Context(), pool)
		if _, err := q.Exec(r.Context(), "INSERT INTO "+payments+" (key) VALUES ($1)", r.Header.Get("X-Test")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if r.Header.Get("X-Fail") != "" {
			http.Error(w, "card network down", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
	rows := func(tag string) int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+payments+" WHERE key = $1", tag).Scan(&n))
		return n
	}
	pg, mem := realStores[2], realStores[0]
	for _, c := range []struct {
		rs         realStore
		failedRows int // rows a failed request leaves
	}{{pg, 0}, {mem, 1}} {
		t.Run(c.rs.name, func(t *testing.T) {
			e, err := idem.New(c.rs.open(t))
			require.NoError(t, err)
			mw, err := httpidem.New(e, httpidem.WithTransactionsIfSupported())
			require.NoError(t, err)
			h := mw(http.HandlerFunc(createPayment))
			post := func(tag string, fail bool) int {
				r := newReq(`{}`, "k-"+tag)
				r.Header.Set("X-Test", tag)
				if fail {
					r.Header.Set("X-Fail", "1")
				}
				return serve(h, r).Code
			}
			ok, bad := c.rs.name+"-ok-"+suffix(), c.rs.name+"-bad-"+suffix()
			for range 3 {
				require.Equal(t, http.StatusCreated, post(ok, false))
			}
			assert.Equal(t, 1, rows(ok), "three posts, one payment")
			require.Equal(t, http.StatusBadGateway, post(bad, true))
			assert.Equal(t, c.failedRows, rows(bad), "transactional mode rolls the insert back; lease mode cannot")
			require.Equal(t, http.StatusCreated, post(bad, false), "the key was released: the retry runs")
		})
	}
}
