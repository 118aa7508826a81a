package httpidem

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// errWriteAfterReturn is what a handler that writes after it returned gets.
var errWriteAfterReturn = errors.New("httpidem: the handler wrote after it returned (net/http forbids it); nothing was sent or kept")

// handlerWriter is the ResponseWriter a lease-mode handler gets: a handle,
// one per request, on the pooled recorder. It is cut off when the request
// ends, so a handler that keeps its ResponseWriter past its return (a
// goroutine it started, say: net/http forbids it) writes nowhere, and never
// into the recycled recorder of another request, whose client and stored
// response are someone else's.
type handlerWriter struct{ t atomic.Pointer[teeWriter] }

func (h *handlerWriter) Header() http.Header {
	if t := h.t.Load(); t != nil {
		return t.Header()
	}
	return http.Header{}
}

func (h *handlerWriter) WriteHeader(code int) {
	if t := h.t.Load(); t != nil {
		t.WriteHeader(code)
	}
}

func (h *handlerWriter) Write(p []byte) (int, error) {
	if t := h.t.Load(); t != nil {
		return t.Write(p)
	}
	return 0, errWriteAfterReturn
}

func (h *handlerWriter) WriteString(s string) (int, error) {
	if t := h.t.Load(); t != nil {
		return t.WriteString(s)
	}
	return 0, errWriteAfterReturn
}

// Flush sends buffered data to the client, when the client writer can.
func (h *handlerWriter) Flush() { _ = h.FlushError() }

// FlushError is Flush for http.ResponseController.
func (h *handlerWriter) FlushError() error {
	if t := h.t.Load(); t != nil {
		return t.FlushError()
	}
	return errWriteAfterReturn
}

// SetReadDeadline is forwarded for http.ResponseController.
func (h *handlerWriter) SetReadDeadline(d time.Time) error {
	if t := h.t.Load(); t != nil {
		return t.SetReadDeadline(d)
	}
	return errWriteAfterReturn
}

// SetWriteDeadline is forwarded for http.ResponseController.
func (h *handlerWriter) SetWriteDeadline(d time.Time) error {
	if t := h.t.Load(); t != nil {
		return t.SetWriteDeadline(d)
	}
	return errWriteAfterReturn
}

// EnableFullDuplex is forwarded for http.ResponseController.
func (h *handlerWriter) EnableFullDuplex() error {
	if t := h.t.Load(); t != nil {
		return t.EnableFullDuplex()
	}
	return errWriteAfterReturn
}

// Hijack is refused: a hijacked connection has no response to keep.
func (h *handlerWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}
