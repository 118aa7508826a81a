package echoidem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/contrib/echoidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/internal/httpconformance"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// conformanceMiddleware is the one place this package's httpidemtest run
// builds the middleware. The 2 s lease keeps today's Retry-After (the
// lease's remainder) within httpidemtest's 2 s; it can go once the engine
// sends its short hint.
func conformanceMiddleware(st store.Store, tx bool) (func(http.Handler) http.Handler, error) {
	opts := []httpidem.Option{
		httpidem.WithScope(func(r *http.Request) ([]string, error) {
			return []string{r.Header.Get(httpconformance.ScopeHeader)}, nil
		}),
		httpidem.WithFingerprinter(keyer.NewFingerprinter(keyer.WithCanonicalJSON(), keyer.WithMaxBody(httpconformance.MaxBody))),
		httpidem.WithLease(2 * time.Second),
	}
	if tx {
		opts = append(opts, httpidem.WithTransactions())
	}
	return httpidem.New(st, opts...)
}

// TestHTTPIdemTest runs httpidemtest through echo: a handler that binds the
// body, answers with c.JSON and fails by returning an *echo.HTTPError (which
// echo's error handler writes), behind echoidem.Middleware, in lease mode on
// memory and transactional mode on SQLite (restarted between a request and
// its retry).
func TestHTTPIdemTest(t *testing.T) {
	for _, cs := range []httpconformance.Store{httpconformance.Memory, httpconformance.SQLite} {
		t.Run(cs.Name, func(t *testing.T) {
			p := &httpconformance.Payments{}
			srv := httpconformance.NewServer(t, httpconformance.Build(cs.Data(t),
				func(st store.Store) (func(http.Handler) http.Handler, error) { return conformanceMiddleware(st, cs.Tx) },
				func(mw func(http.Handler) http.Handler) http.Handler {
					e := echo.New()
					e.HideBanner, e.HidePort = true, true
					e.POST("/payments", func(c echo.Context) error {
						var req struct {
							Amount int `json:"amount"`
						}
						if err := c.Bind(&req); err != nil {
							return err
						}
						if req.Amount <= 0 {
							return echo.NewHTTPError(http.StatusBadRequest, "amount required")
						}
						id, status := p.Create(c.Request().Context())
						if status != 0 {
							return echo.NewHTTPError(status, "failing on purpose")
						}
						httpconformance.Answer(c.Response(), id, req.Amount)
						return nil
					}, echoidem.Middleware(mw))
					return e
				}))
			httpidemtest.Run(t, httpconformance.Target(srv, p, "/payments", cs.Durable))
		})
	}
}
