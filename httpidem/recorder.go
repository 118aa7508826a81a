package httpidem

import (
	"bufio"
	"net"
	"net/http"
)

// capture records what a handler writes: the final status, the header as it
// stood when the status was written, and the body up to max bytes.
type capture struct {
	status   int
	header   http.Header // snapshot at WriteHeader
	body     []byte
	max      int
	overflow bool // the body was longer than max: not kept
}

func (c *capture) capture(p []byte) {
	if c.overflow {
		return
	}
	if len(c.body)+len(p) > c.max {
		c.overflow = true
		c.body = nil
		return
	}
	c.body = append(c.body, p...)
}

// finalStatus is the status the client saw: 200 when the handler wrote
// nothing.
func (c *capture) finalStatus() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}

// teeWriter writes through to the client while capturing (lease mode): the
// client sees the response as the handler writes it, streaming included.
type teeWriter struct {
	w http.ResponseWriter
	capture
}

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.status != 0 {
		t.w.WriteHeader(code) // let net/http log the superfluous call
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		t.w.WriteHeader(code) // informational: passed on, not kept
		return
	}
	t.status = code
	t.header = t.w.Header().Clone()
	t.w.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	n, err := t.w.Write(p)
	t.capture.capture(p[:n])
	return n, err
}

// Flush sends buffered data to the client, when the client writer can.
func (t *teeWriter) Flush() {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(t.w).Flush()
}

// Unwrap lets http.ResponseController reach the client's writer (deadlines,
// full duplex).
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.w }

// Hijack is refused: a hijacked connection has no response to keep.
func (t *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// bufferWriter holds the whole response until the transaction has committed
// (transactional mode): a client must never see a success for a rolled-back
// transaction. It has no Unwrap, so the handler cannot bypass the buffer.
type bufferWriter struct {
	hdr     http.Header
	capture // max is unlimited: the caller compares len(body) with its limit
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
	b.body = append(b.body, p...)
	return len(p), nil
}

// Flush is a no-op: nothing reaches the client before the commit.
func (b *bufferWriter) Flush() {}

// send writes the buffered response to the client.
func (b *bufferWriter) send(w http.ResponseWriter) {
	src := b.header
	if b.status == 0 {
		src = b.hdr
	}
	h := w.Header()
	for k, vs := range src {
		h[k] = vs
	}
	w.WriteHeader(b.finalStatus())
	w.Write(b.body)
}
