package echoidem_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/contrib/echoidem"
	"github.com/idemkit/idemkit/internal/httpconformance"
)

// TestHTTPIdemTest runs httpidemtest through echo: a handler that binds the
// body, answers with c.JSON and fails by returning an *echo.HTTPError (which
// echo's error handler writes), behind echoidem.Middleware, in lease mode on
// memory and transactional mode on SQLite (restarted between a request and
// its retry).
func TestHTTPIdemTest(t *testing.T) {
	httpconformance.Run(t, []httpconformance.Store{httpconformance.Memory, httpconformance.SQLite}, 0,
		func(p *httpconformance.Payments, mw func(http.Handler) http.Handler) http.Handler {
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
		})
}
