package echoidem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/contrib/echoidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

// payments is the effect: rows in SQLite written in the middleware's
// transaction (tx mode), or a counter (lease mode).
type payments struct {
	mu   sync.Mutex
	n    int
	db   *sql.DB // tx mode
	hold chan struct{}
	in   chan struct{}
}

func (p *payments) create(ctx context.Context, amount int) (int64, error) {
	if p.in != nil {
		p.in <- struct{}{}
		<-p.hold
	}
	if p.db != nil {
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return 0, errors.New("not in the idempotency transaction")
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO payments (amount) VALUES (?)`, amount)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return int64(p.n), nil
}

func (p *payments) count(t *testing.T) int {
	t.Helper()
	if p.db != nil {
		var n int
		require.NoError(t, p.db.QueryRow(`SELECT count(*) FROM payments`).Scan(&n))
		return n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

type mode struct {
	name string
	open func(t *testing.T) (store.Store, *payments)
	opts []httpidem.Option
}

var modes = []mode{
	{"lease/memory", func(t *testing.T) (store.Store, *payments) {
		st, err := memory.New()
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st, &payments{}
	}, nil},
	{"transactional/sqlite", func(t *testing.T) (store.Store, *payments) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		_, err = st.DB().Exec(`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, amount INTEGER NOT NULL)`)
		require.NoError(t, err)
		return st, &payments{db: st.DB()}
	}, []httpidem.Option{httpidem.WithTransactions()}},
}

type payReq struct {
	Amount int `json:"amount"`
}

// server is an echo app with POST /payments behind echoidem.
func server(t *testing.T, m mode, st store.Store, p *payments, opts ...httpidem.Option) *httptest.Server {
	t.Helper()
	mw0, err := httpidem.New(st, append(opts, m.opts...)...)
	require.NoError(t, err)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	mw := echoidem.Middleware(mw0)
	e.POST("/payments", func(c echo.Context) error {
		var req payReq
		if err := c.Bind(&req); err != nil {
			return err
		}
		switch req.Amount {
		case 0:
			return echo.NewHTTPError(http.StatusBadRequest, "amount required")
		case 402:
			return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")
		case 500:
			return errors.New("provider down") // echo answers 500
		}
		id, err := p.create(c.Request().Context(), req.Amount)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Location", "/payments/1")
		return c.JSON(http.StatusCreated, map[string]any{"id": id, "amount": req.Amount})
	}, mw)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	status   int
	body     string
	replayed bool
	header   http.Header
}

func post(t *testing.T, url, key, body string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", `"`+key+`"`)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return result{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true", resp.Header}
}

func TestTenParallelOnePayment(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st, p := m.open(t)
			srv := server(t, m, st, p, httpidem.WithWait(10*time.Second))
			key := rand.Text()
			results := make([]result, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = post(t, srv.URL+"/payments", key, `{"amount":1990}`) })
			}
			wg.Wait()
			replays := 0
			for _, r := range results {
				require.Equal(t, http.StatusCreated, r.status, r.body)
				assert.JSONEq(t, `{"id":1,"amount":1990}`, r.body)
				assert.Equal(t, "/payments/1", r.header.Get("Location"))
				if r.replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.count(t), "one payment")

			r := post(t, srv.URL+"/payments", key, `{"amount":9999}`)
			assert.Equal(t, http.StatusUnprocessableEntity, r.status)
			r = post(t, srv.URL+"/payments", "", `{"amount":1990}`)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, 1, p.count(t))
		})
	}
}

// TestConflictThenReplay: without WithWait, lease mode answers duplicates
// in flight 409 with Retry-After; after the first finishes they replay.
func TestConflictThenReplay(t *testing.T) {
	m := modes[0]
	st, p := m.open(t)
	p.in, p.hold = make(chan struct{}, 1), make(chan struct{})
	srv := server(t, m, st, p)
	key := rand.Text()
	first := make(chan result, 1)
	go func() { first <- post(t, srv.URL+"/payments", key, `{"amount":7}`) }()
	<-p.in
	var wg sync.WaitGroup
	results := make([]result, 9)
	for i := range results {
		wg.Go(func() { results[i] = post(t, srv.URL+"/payments", key, `{"amount":7}`) })
	}
	wg.Wait()
	for _, r := range results {
		assert.Equal(t, http.StatusConflict, r.status)
		assert.NotEmpty(t, r.header.Get("Retry-After"))
	}
	close(p.hold)
	f := <-first
	require.Equal(t, http.StatusCreated, f.status)
	again := post(t, srv.URL+"/payments", key, `{"amount":7}`)
	assert.Equal(t, http.StatusCreated, again.status)
	assert.True(t, again.replayed)
	assert.Equal(t, f.body, again.body)
	assert.Equal(t, 1, p.count(t))
}

// TestHandlerErrors: an error returned by the handler becomes the response
// inside the middleware, so a 4xx is stored and replayed and a 500 releases
// the key (echo.WrapMiddleware fails this: the error response is written
// after the middleware has stored an empty one).
func TestHandlerErrors(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st, p := m.open(t)
			srv := server(t, m, st, p)
			key := rand.Text()
			first := post(t, srv.URL+"/payments", key, `{"amount":402}`)
			assert.Equal(t, http.StatusPaymentRequired, first.status)
			assert.Contains(t, first.body, "card declined")
			again := post(t, srv.URL+"/payments", key, `{"amount":402}`)
			assert.Equal(t, http.StatusPaymentRequired, again.status)
			assert.True(t, again.replayed)
			assert.Equal(t, first.body, again.body)

			key = rand.Text()
			r := post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.status)
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.status)
			assert.False(t, r.replayed, "a 500 released the key: the retry ran")
			assert.Equal(t, 0, p.count(t))
		})
	}
}

func TestNilMiddleware(t *testing.T) {
	e := echo.New()
	ran := false
	e.POST("/", func(echo.Context) error { ran = true; return nil }, echoidem.Middleware(nil))
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.False(t, ran)
}
