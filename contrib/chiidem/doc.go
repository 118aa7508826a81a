// Package chiidem shows and tests idemkit's HTTP middleware (httpidem) on
// chi routers. It has no code: chi takes func(http.Handler) http.Handler
// middleware as it is, so httpidem plugs in directly,
//
//	e, err := idem.New(st) // lease, wait, logger, tracer: set once
//	if err != nil {
//		return err
//	}
//	mw, err := httpidem.New(e, httpidem.WithScope(userOf))
//	if err != nil {
//		return err
//	}
//	r := chi.NewRouter()
//	r.With(mw).Post("/accounts/{id}/payments", createPayment.ServeHTTP)
//
// and chi's URL parameters (chi.URLParam) keep working inside, in both
// modes: the middleware's request carries chi's route context. Put the
// middleware after your authentication middleware, so WithScope can read the
// caller. This module holds the end-to-end tests and the example.
package chiidem
