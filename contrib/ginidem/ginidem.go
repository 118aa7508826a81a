// Package ginidem puts idemkit's HTTP middleware (httpidem) in front of gin
// handlers, so a POST retried with the same Idempotency-Key runs once and
// every retry gets the first response back.
//
//	e, err := idem.New(st) // lease, wait, logger, tracer: set once
//	if err != nil {
//		return err
//	}
//	mw, err := httpidem.New(e, httpidem.WithScope(userOf))
//	if err != nil {
//		return err
//	}
//	r := gin.New()
//	r.POST("/payments", ginidem.Middleware(mw), gin.WrapH(createPayment))
//
// Middleware takes the middleware already built by httpidem, so every
// httpidem option applies unchanged. The handlers after it write through the
// middleware's writer (gin's c.Writer is replaced for the duration): in
// transactional mode the response is buffered and sent only after the
// commit, and what is stored for replay is what the handler wrote. c.Request
// is the middleware's request: in transactional mode its context carries the
// transaction (sqlite.TxFrom(c.Request.Context()),
// postgres.TxFrom(c.Request.Context())). Use c.Request.Context(), not c
// itself, as the context of your queries, unless the engine has
// ContextWithFallback set.
//
// When the middleware answers by itself (a replay, 400, 409, 422, 503) the
// rest of the chain is aborted (c.Abort) and does not run.
package ginidem

import (
	"bufio"
	"errors"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Middleware returns a gin handler that runs the rest of the chain inside mw,
// an httpidem middleware (or any func(http.Handler) http.Handler). A nil mw
// answers every request 500.
func Middleware(mw func(http.Handler) http.Handler) gin.HandlerFunc {
	if mw == nil {
		return func(c *gin.Context) {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "ginidem: Middleware was given a nil middleware"})
		}
	}
	return func(c *gin.Context) {
		outer, req := c.Writer, c.Request
		ran := false
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			inner := &writer{w: w, status: http.StatusOK, size: -1, outer: outer}
			c.Writer, c.Request = inner, r
			defer func() { c.Writer, c.Request = outer, req }()
			c.Next()
			// gin writes a status set without a body after the chain; do
			// it here, while the writer is still the middleware's.
			inner.WriteHeaderNow()
		}))
		h.ServeHTTP(outer, req)
		if !ran {
			c.Abort()
		}
	}
}

// writer is the gin.ResponseWriter the handlers see: it defers the status
// like gin's own writer and sends everything to the middleware's writer w.
type writer struct {
	w      http.ResponseWriter
	status int
	size   int // -1 until the header is written
	outer  gin.ResponseWriter
}

var _ gin.ResponseWriter = (*writer)(nil)

func (x *writer) Header() http.Header { return x.w.Header() }

func (x *writer) WriteHeader(code int) {
	if code > 0 && !x.Written() {
		x.status = code
	}
}

func (x *writer) WriteHeaderNow() {
	if !x.Written() {
		x.size = 0
		x.w.WriteHeader(x.status)
	}
}

func (x *writer) Write(b []byte) (int, error) {
	x.WriteHeaderNow()
	n, err := x.w.Write(b)
	x.size += n
	return n, err
}

func (x *writer) WriteString(s string) (int, error) { return x.Write([]byte(s)) }

func (x *writer) Status() int { return x.status }

func (x *writer) Size() int { return x.size }

func (x *writer) Written() bool { return x.size != -1 }

// Unwrap gives http.ResponseController the middleware's writer.
func (x *writer) Unwrap() http.ResponseWriter { return x.w }

var errNoHijack = errors.New("ginidem: the idempotency middleware's writer cannot be hijacked")

// Hijack is refused unless the middleware's writer allows it: a hijacked
// connection bypasses what the middleware stores for replay.
func (x *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := x.w.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errNoHijack
}

// CloseNotify is gin's (the connection's), since the middleware's writer
// has none.
func (x *writer) CloseNotify() <-chan bool { return x.outer.CloseNotify() }

// Flush writes the header and flushes the middleware's writer, when it can
// (in transactional mode nothing is sent before the commit).
func (x *writer) Flush() {
	x.WriteHeaderNow()
	http.NewResponseController(x.w).Flush()
}

func (x *writer) Pusher() http.Pusher {
	if p, ok := x.w.(http.Pusher); ok {
		return p
	}
	return nil
}
