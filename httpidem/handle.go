package httpidem

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// errWriteAfterReturn is what a handler that writes after it returned gets.
var errWriteAfterReturn = errors.New("httpidem: the handler wrote after it returned (net/http forbids it); nothing was sent or kept")

// errReadAfterReturn is what a handler that reads its request body after it
// returned gets.
var errReadAfterReturn = errors.New("httpidem: the handler read its request body after it returned (net/http forbids it)")

// handles are a lease-mode handler's own handles on its request's pooled
// state, one allocation per request that runs: its ResponseWriter and its
// request body.
type handles struct {
	w handlerWriter
	b handlerBody
}

// handlerBody is the request body a lease-mode handler reads: the bytes
// the fingerprint read, from the pooled run's buffer. Like handlerWriter it
// is cut off when the request ends, so a handler that keeps reading past
// its return (net/http forbids it) reads nothing, and never the body of
// the next request the buffer holds. It is an io.Seeker and an
// io.WriterTo, as a bytes.Reader is.
type handlerBody struct {
	r    atomic.Pointer[bytes.Reader]
	orig io.ReadCloser // the request's own body, drained; Close closes it
}

// newHandlerBody returns a handlerBody over br that is never cut off.
func newHandlerBody(br *bytes.Reader, orig io.ReadCloser) *handlerBody {
	b := &handlerBody{orig: orig}
	b.r.Store(br)
	return b
}

func (b *handlerBody) Read(p []byte) (int, error) {
	if r := b.r.Load(); r != nil {
		return r.Read(p)
	}
	return 0, errReadAfterReturn
}

// WriteTo lets io.Copy skip its own buffer.
func (b *handlerBody) WriteTo(w io.Writer) (int64, error) {
	if r := b.r.Load(); r != nil {
		return r.WriteTo(w)
	}
	return 0, errReadAfterReturn
}

// Seek moves the read offset, as bytes.Reader's Seek does.
func (b *handlerBody) Seek(offset int64, whence int) (int64, error) {
	if r := b.r.Load(); r != nil {
		return r.Seek(offset, whence)
	}
	return 0, errReadAfterReturn
}

// Close closes the request's own body.
func (b *handlerBody) Close() error { return b.orig.Close() }

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
