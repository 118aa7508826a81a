package ginidem_test

import (
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/contrib/ginidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/frameworktest"
	"github.com/idemkit/idemkit/store"
)

func init() { gin.SetMode(gin.TestMode) }

// The payments effect, the modes and the client come from
// internal/frameworktest, shared with the other framework integrations.
type (
	payments = frameworktest.Payments
	mode     = frameworktest.Mode
	result   = frameworktest.Result
)

var modes = frameworktest.Modes

// server is a gin engine with POST /payments behind ginidem.
func server(t *testing.T, m mode, st store.Store, p *payments, opts ...any) (*httptest.Server, *int) {
	t.Helper()
	mw := frameworktest.Middleware(t, m, st, opts...)
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
		id, err := p.Create(c.Request.Context(), "", req.Amount)
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			return
		}
		c.Header("Location", "/payments/1")
		c.JSON(http.StatusCreated, gin.H{"id": id, "amount": req.Amount})
	})
	r.POST("/empty", ginidem.Middleware(mw), func(c *gin.Context) {
		p.Create(c.Request.Context(), "", 1)
		c.Status(http.StatusAccepted) // a status and no body: gin writes it after the chain
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, &after
}

func post(t *testing.T, url, key, body string) result {
	t.Helper()
	return frameworktest.Post(t, url, key, body)
}

func TestTenParallelOnePayment(t *testing.T) {
	for _, m := range modes {
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
			srv, after := server(t, m, st, p)
			key := rand.Text()
			results := make([]result, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = post(t, srv.URL+"/payments", key, `{"amount":1990}`) })
			}
			wg.Wait()
			replays := 0
			for _, r := range results {
				require.Equal(t, http.StatusCreated, r.Status, r.Body)
				assert.JSONEq(t, `{"id":1,"amount":1990}`, r.Body)
				assert.Equal(t, "/payments/1", r.Header.Get("Location"), "headers set with c.Header are kept")
				if r.Replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.Count(t), "one payment")
			assert.Equal(t, 1, *after, "the chain after the middleware ran once")

			r := post(t, srv.URL+"/payments", key, `{"amount":9999}`)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
			r = post(t, srv.URL+"/payments", "", `{"amount":1990}`)
			assert.Equal(t, http.StatusBadRequest, r.Status)
			assert.Equal(t, 1, p.Count(t))
			assert.Equal(t, 1, *after, "the middleware's own answers abort the chain")
		})
	}
}

// TestConflictThenReplay: with idem.WithWait(0), duplicates in flight get
// 409 with a short Retry-After; after the first finishes they replay.
func TestConflictThenReplay(t *testing.T) {
	m := modes[0]
	st, p := m.Open(t)
	p.In, p.Hold = make(chan struct{}, 1), make(chan struct{})
	srv, _ := server(t, m, st, p, idem.WithWait(0))
	key := rand.Text()
	first := make(chan result, 1)
	go func() { first <- post(t, srv.URL+"/payments", key, `{"amount":7}`) }()
	<-p.In
	var wg sync.WaitGroup
	results := make([]result, 9)
	for i := range results {
		wg.Go(func() { results[i] = post(t, srv.URL+"/payments", key, `{"amount":7}`) })
	}
	wg.Wait()
	for _, r := range results {
		assert.Equal(t, http.StatusConflict, r.Status)
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
	}
	close(p.Hold)
	f := <-first
	require.Equal(t, http.StatusCreated, f.Status)
	again := post(t, srv.URL+"/payments", key, `{"amount":7}`)
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.True(t, again.Replayed)
	assert.Equal(t, f.Body, again.Body)
	assert.Equal(t, 1, p.Count(t))
}

func TestStatusWithoutBodyAndRelease(t *testing.T) {
	for _, m := range modes {
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
			srv, _ := server(t, m, st, p)
			key := rand.Text()
			r := post(t, srv.URL+"/empty", key, `{}`)
			assert.Equal(t, http.StatusAccepted, r.Status)
			r = post(t, srv.URL+"/empty", key, `{}`)
			assert.Equal(t, http.StatusAccepted, r.Status)
			assert.True(t, r.Replayed, "a status written after the chain is what is stored")
			assert.Equal(t, 1, p.Count(t))

			// A 500 releases the key: the retry runs the handler again.
			key = rand.Text()
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.Status)
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.Status)
			assert.False(t, r.Replayed)
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
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
			mw := frameworktest.Middleware(t, m, st)
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
				id, err := p.Create(c.Request.Context(), "", 1)
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
