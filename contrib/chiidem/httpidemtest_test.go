package chiidem_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/idemkit/idemkit/internal/httpconformance"
)

// TestHTTPIdemTest runs httpidemtest through chi: the middleware on a route
// group (r.With) under chi's Recoverer, in lease mode on memory and
// transactional mode on SQLite (restarted between a request and its retry).
func TestHTTPIdemTest(t *testing.T) {
	httpconformance.Run(t, []httpconformance.Store{httpconformance.Memory, httpconformance.SQLite}, 0,
		func(p *httpconformance.Payments, mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(middleware.Recoverer)
			r.With(mw).Post("/payments", p.Handler().ServeHTTP)
			return r
		})
}
