package ginidem_test

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

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/contrib/ginidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

func init() { gin.SetMode(gin.TestMode) }

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

// server is a gin engine with POST /payments behind ginidem.
func server(t *testing.T, m mode, st store.Store, p *payments, opts ...httpidem.Option) (*httptest.Server, *int) {
	t.Helper()
	mw, err := httpidem.New(st, append(opts, m.opts...)...)
	require.NoError(t, err)
	after := 0 // handlers after the middleware that ran
	r := gin.New()
	r.POST("/payments", ginidem.Middleware(mw), func(c *gin.Context) {
		after++ // guarded: tests read it only after the requests end
		c.Next()
	}, func(c *gin.Context) {
		var req struct {
			Amount int `json:"amount" binding:"required"`
		}
		if err := c.ShouldBindJSON(&req); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		if req.Amount == 500 {
			c.JSON(http.StatusInternalServerError, gin.H{"error": "provider down"})
			return
		}
		id, err := p.create(c.Request.Context(), req.Amount)
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			return
		}
		c.Header("Location", "/payments/1")
		c.JSON(http.StatusCreated, gin.H{"id": id, "amount": req.Amount})
	})
	r.POST("/empty", ginidem.Middleware(mw), func(c *gin.Context) {
		p.create(c.Request.Context(), 1)
		c.Status(http.StatusAccepted) // a status and no body: gin writes it after the chain
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, &after
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
			srv, after := server(t, m, st, p, httpidem.WithWait(10*time.Second))
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
				assert.Equal(t, "/payments/1", r.header.Get("Location"), "headers set with c.Header are kept")
				if r.replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.count(t), "one payment")
			assert.Equal(t, 1, *after, "the chain after the middleware ran once")

			r := post(t, srv.URL+"/payments", key, `{"amount":9999}`)
			assert.Equal(t, http.StatusUnprocessableEntity, r.status)
			r = post(t, srv.URL+"/payments", "", `{"amount":1990}`)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, 1, p.count(t))
			assert.Equal(t, 1, *after, "the middleware's own answers abort the chain")
		})
	}
}

// TestConflictThenReplay: without WithWait, lease mode answers duplicates
// in flight 409 with Retry-After; after the first finishes they replay.
func TestConflictThenReplay(t *testing.T) {
	m := modes[0]
	st, p := m.open(t)
	p.in, p.hold = make(chan struct{}, 1), make(chan struct{})
	srv, _ := server(t, m, st, p)
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

func TestStatusWithoutBodyAndRelease(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st, p := m.open(t)
			srv, _ := server(t, m, st, p)
			key := rand.Text()
			r := post(t, srv.URL+"/empty", key, `{}`)
			assert.Equal(t, http.StatusAccepted, r.status)
			r = post(t, srv.URL+"/empty", key, `{}`)
			assert.Equal(t, http.StatusAccepted, r.status)
			assert.True(t, r.replayed, "a status written after the chain is what is stored")
			assert.Equal(t, 1, p.count(t))

			// A 500 releases the key: the retry runs the handler again.
			key = rand.Text()
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.status)
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.status)
			assert.False(t, r.replayed)
		})
	}
}

func TestNilMiddleware(t *testing.T) {
	r := gin.New()
	ran := false
	r.POST("/", ginidem.Middleware(nil), func(*gin.Context) { ran = true })
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.False(t, ran)
}

// TestOuterMiddlewareSeesStatus: a middleware before ginidem (a logger)
// reads the status the client got from c.Writer, whoever wrote it.
func TestOuterMiddlewareSeesStatus(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st, p := m.open(t)
			mw, err := httpidem.New(st, m.opts...)
			require.NoError(t, err)
			var mu sync.Mutex
			var seen []int
			r := gin.New()
			r.Use(func(c *gin.Context) {
				c.Next()
				mu.Lock()
				seen = append(seen, c.Writer.Status())
				mu.Unlock()
			})
			r.POST("/payments", ginidem.Middleware(mw), func(c *gin.Context) {
				id, err := p.create(c.Request.Context(), 1)
				if err != nil {
					c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
					return
				}
				c.JSON(http.StatusCreated, gin.H{"id": id})
			})
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			key := rand.Text()
			post(t, srv.URL+"/payments", key, `{}`)
			post(t, srv.URL+"/payments", key, `{}`)
			post(t, srv.URL+"/payments", "", `{}`)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []int{http.StatusCreated, http.StatusCreated, http.StatusBadRequest}, seen)
		})
	}
}
