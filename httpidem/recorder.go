package httpidem

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// teeWriter writes through to the client while capturing (lease mode): the
// client sees the response as the handler writes it, streaming included.
// What is kept is what the handler wrote, whatever the client's connection
// accepted: a client that went away mid-body does not shorten the record.
//
// It has no Unwrap, so a handler cannot write around the capture; the
// http.ResponseController methods that do not write (deadlines, full
// duplex) and Flush are forwarded to the client's writer.
type teeWriter struct {
	w        http.ResponseWriter
	max      int // body bytes kept at most
	status   int
	header   http.Header // snapshot at WriteHeader
	body     []byte
	overflow bool // the body was longer than max: not kept
	switched bool // the handler answered 101 Switching Protocols
}

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.status != 0 {
		t.w.WriteHeader(code) // let net/http log the superfluous call
		return
	}
	if code >= 100 && code < 200 {
		if code == http.StatusSwitchingProtocols {
			// Final for the connection, but nothing a retry could be given
			// back: the key is recorded as done without a response.
			t.switched = true
		}
		t.w.WriteHeader(code) // informational: passed on, never kept as final
		return
	}
	t.status = code
	t.header = t.w.Header().Clone()
	t.w.WriteHeader(code)
}

func (t *teeWriter) capture(n int) bool {
	if t.overflow {
		return false
	}
	if len(t.body)+n > t.max {
		t.overflow, t.body = true, nil
		return false
	}
	return true
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if t.capture(len(p)) {
		t.body = append(t.body, p...)
	}
	return t.w.Write(p)
}

// WriteString avoids a copy for io.WriteString callers.
func (t *teeWriter) WriteString(s string) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if t.capture(len(s)) {
		t.body = append(t.body, s...)
	}
	return io.WriteString(t.w, s)
}

// finalStatus is the status the client saw: 200 when the handler wrote
// nothing.
func (t *teeWriter) finalStatus() int {
	if t.status == 0 {
		return http.StatusOK
	}
	return t.status
}

// encoded returns the replay encoding of what the handler wrote: the header
// as it stood at WriteHeader, the trailers as they stand now, the body.
func (t *teeWriter) encoded(p *headerPolicy) []byte {
	h := t.header
	if t.status == 0 { // nothing written: net/http sends a bare 200
		h = t.w.Header()
	}
	return encodeResponse(t.finalStatus(), withTrailers(h, t.w.Header()), p, t.body)
}

// Flush sends buffered data to the client, when the client writer can.
func (t *teeWriter) Flush() { _ = t.FlushError() }

// FlushError is Flush for http.ResponseController.
func (t *teeWriter) FlushError() error {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(t.w).Flush()
}

// SetReadDeadline is forwarded for http.ResponseController.
func (t *teeWriter) SetReadDeadline(d time.Time) error {
	return http.NewResponseController(t.w).SetReadDeadline(d)
}

// SetWriteDeadline is forwarded for http.ResponseController.
func (t *teeWriter) SetWriteDeadline(d time.Time) error {
	return http.NewResponseController(t.w).SetWriteDeadline(d)
}

// EnableFullDuplex is forwarded for http.ResponseController.
func (t *teeWriter) EnableFullDuplex() error {
	return http.NewResponseController(t.w).EnableFullDuplex()
}

// Hijack is refused: a hijacked connection has no response to keep.
func (t *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// withTrailers returns head plus the trailers set in now (the handler's
// header map after it returned): those declared in head's Trailer field,
// and those set with http.TrailerPrefix. They are stored under
// http.TrailerPrefix, so a replay sends them as trailers again, and the
// header policy judges them by their own names.
func withTrailers(head, now http.Header) http.Header {
	trailers := map[string][]string{}
	for _, decl := range head["Trailer"] {
		for name := range strings.SplitSeq(decl, ",") {
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if vs := now[name]; name != "" && len(vs) > 0 {
				trailers[name] = vs
			}
		}
	}
	for k, vs := range now {
		if name, ok := cutTrailerPrefix(k); ok && len(vs) > 0 {
			trailers[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if len(trailers) == 0 {
		return head
	}
	out := make(http.Header, len(head)+len(trailers))
	for k, vs := range head {
		if _, ok := cutTrailerPrefix(k); !ok {
			out[k] = vs
		}
	}
	for name, vs := range trailers {
		out[http.TrailerPrefix+name] = append([]string(nil), vs...)
	}
	return out
}

func cutTrailerPrefix(k string) (string, bool) {
	if len(k) > len(http.TrailerPrefix) && strings.EqualFold(k[:len(http.TrailerPrefix)], http.TrailerPrefix) {
		return k[len(http.TrailerPrefix):], true
	}
	return "", false
}

// bufferWriter holds the response until the transaction has committed
// (transactional mode): a client must never see a success for a rolled-back
// transaction. It keeps at most max body bytes: past that it drops the
// body, cancels the handler's context and fails every further Write, so
// memory stays bounded whatever the handler streams. It has no Unwrap, so
// the handler cannot bypass the buffer.
type bufferWriter struct {
	inner    http.ResponseWriter // for deadlines only
	max      int
	cancel   context.CancelCauseFunc
	hdr      http.Header
	status   int
	header   http.Header // snapshot at WriteHeader
	body     []byte
	overflow bool
}

func (b *bufferWriter) Header() http.Header {
	if b.hdr == nil {
		b.hdr = make(http.Header)
	}
	return b.hdr
}

func (b *bufferWriter) WriteHeader(code int) {
	if b.status != 0 || (code >= 100 && code < 200) {
		return // informational statuses cannot be sent before the commit
	}
	b.status = code
	b.header = b.Header().Clone()
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	if b.overflow {
		return 0, errResponseTooLarge
	}
	if len(b.body)+len(p) > b.max {
		b.overflow, b.body = true, nil
		b.cancel(errResponseTooLarge)
		return 0, errResponseTooLarge
	}
	b.body = append(b.body, p...)
	return len(p), nil
}

// Flush is a no-op: nothing reaches the client before the commit.
func (b *bufferWriter) Flush() {}

// SetReadDeadline is forwarded for http.ResponseController.
func (b *bufferWriter) SetReadDeadline(d time.Time) error {
	return http.NewResponseController(b.inner).SetReadDeadline(d)
}

// SetWriteDeadline is forwarded for http.ResponseController.
func (b *bufferWriter) SetWriteDeadline(d time.Time) error {
	return http.NewResponseController(b.inner).SetWriteDeadline(d)
}

func (b *bufferWriter) finalStatus() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// finalHeader is the header the client will get, trailers included.
func (b *bufferWriter) finalHeader() http.Header {
	if b.status == 0 {
		return b.hdr
	}
	return withTrailers(b.header, b.hdr)
}

// send writes the buffered response to the client.
func (b *bufferWriter) send(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range b.finalHeader() {
		h[k] = vs
	}
	w.WriteHeader(b.finalStatus())
	w.Write(b.body)
}
