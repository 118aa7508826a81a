// Package echoidem puts idemkit's HTTP middleware (httpidem) in front of echo
// (v4) handlers, so a POST retried with the same Idempotency-Key runs once
// and every retry gets the first response back.
//
//	eng, err := idem.New(st) // lease, wait, logger, tracer: set once
//	if err != nil {
//		return err
//	}
//	mw, err := httpidem.New(eng, httpidem.WithScope(userOf))
//	if err != nil {
//		return err
//	}
//	e := echo.New()
//	e.POST("/payments", echo.WrapHandler(createPayment), echoidem.Middleware(mw))
//
// Middleware takes the middleware already built by httpidem, so every
// httpidem option applies unchanged. The handler writes through the
// middleware's writer (c.Response() wraps it for the duration), and
// c.Request() is the middleware's request: in transactional mode its context
// carries the transaction (sqlite.TxFrom(c.Request().Context()),
// postgres.TxFrom(c.Request().Context())).
//
// Unlike echo.WrapMiddleware, an error returned by the handler is turned
// into its response (c.Error, the echo's HTTPErrorHandler) inside the
// middleware: that response is the one stored and replayed, and a 5xx
// releases the key so the retry runs. The error is therefore handled where
// it is returned and not passed on to the middlewares outside this one,
// which see the response instead (c.Response().Status).
package echoidem

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Middleware returns an echo middleware that runs the handler inside mw, an
// httpidem middleware (or any func(http.Handler) http.Handler). A nil mw
// answers every request 500.
func Middleware(mw func(http.Handler) http.Handler) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if mw == nil {
			return func(echo.Context) error {
				return echo.NewHTTPError(http.StatusInternalServerError, "echoidem: Middleware was given a nil middleware")
			}
		}
		return func(c echo.Context) error {
			res, req := c.Response(), c.Request()
			mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.SetRequest(r)
				c.SetResponse(echo.NewResponse(w, c.Echo()))
				defer func() {
					c.SetRequest(req)
					c.SetResponse(res)
				}()
				if err := next(c); err != nil {
					c.Error(err)
				}
			})).ServeHTTP(res, req)
			return nil
		}
	}
}
