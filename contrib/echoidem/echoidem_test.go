package echoidem_test

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/contrib/echoidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/frameworktest"
	"github.com/idemkit/idemkit/store"
)

// The payments effect, the modes and the client come from
// internal/frameworktest, shared with the other framework integrations.
type (
	payments = frameworktest.Payments
	mode     = frameworktest.Mode
	result   = frameworktest.Result
)

var modes = frameworktest.Modes

type payReq struct {
	Amount int `json:"amount"`
}

// server is an echo app with POST /payments behind echoidem.
func server(t *testing.T, m mode, st store.Store, p *payments, opts ...any) *httptest.Server {
	t.Helper()
	mw0 := frameworktest.Middleware(t, m, st, opts...)
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
		id, err := p.Create(c.Request().Context(), "", req.Amount)
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

func post(t *testing.T, url, key, body string) result {
	t.Helper()
	return frameworktest.Post(t, url, key, body)
}

func TestTenParallelOnePayment(t *testing.T) {
	for _, m := range modes {
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
			srv := server(t, m, st, p)
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
				assert.Equal(t, "/payments/1", r.Header.Get("Location"))
				if r.Replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.Count(t), "one payment")

			r := post(t, srv.URL+"/payments", key, `{"amount":9999}`)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
			r = post(t, srv.URL+"/payments", "", `{"amount":1990}`)
			assert.Equal(t, http.StatusBadRequest, r.Status)
			assert.Equal(t, 1, p.Count(t))
		})
	}
}

// TestConflictThenReplay: with idem.WithWait(0), duplicates in flight get
// 409 with a short Retry-After; after the first finishes they replay.
func TestConflictThenReplay(t *testing.T) {
	m := modes[0]
	st, p := m.Open(t)
	p.In, p.Hold = make(chan struct{}, 1), make(chan struct{})
	srv := server(t, m, st, p, idem.WithWait(0))
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

// TestHandlerErrors: an error returned by the handler becomes the response
// inside the middleware, so a 4xx is stored and replayed and a 500 releases
// the key (echo.WrapMiddleware fails this: the error response is written
// after the middleware has stored an empty one).
func TestHandlerErrors(t *testing.T) {
	for _, m := range modes {
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
			srv := server(t, m, st, p)
			key := rand.Text()
			first := post(t, srv.URL+"/payments", key, `{"amount":402}`)
			assert.Equal(t, http.StatusPaymentRequired, first.Status)
			assert.Contains(t, first.Body, "card declined")
			again := post(t, srv.URL+"/payments", key, `{"amount":402}`)
			assert.Equal(t, http.StatusPaymentRequired, again.Status)
			assert.True(t, again.Replayed)
			assert.Equal(t, first.Body, again.Body)

			key = rand.Text()
			r := post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.Status)
			r = post(t, srv.URL+"/payments", key, `{"amount":500}`)
			assert.Equal(t, http.StatusInternalServerError, r.Status)
			assert.False(t, r.Replayed, "a 500 released the key: the retry ran")
			assert.Equal(t, 0, p.Count(t))
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
