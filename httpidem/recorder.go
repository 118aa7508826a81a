package httpidem

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// teeWriter writes through to the client while capturing (lease mode): the
// client sees the response as the handler writes it, streaming included.
// The capture is the replay encoding itself: the head is encoded when the
// status is written (the header as it stood then), the body appended as it
// is written, so a kept response is never copied again.
type teeWriter struct {
	w        http.ResponseWriter
	policy   *headerPolicy
	max      int // body bytes kept at most
	status   int
	enc      []byte // head, then body
	head     int    // len of the head in enc
	overflow bool   // the body was longer than max: not kept
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
	t.enc = appendHead(make([]byte, 0, 128), code, t.w.Header(), t.policy)
	t.head = len(t.enc)
	t.w.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	n, err := t.w.Write(p)
	if !t.overflow {
		if len(t.enc)-t.head+n > t.max {
			t.overflow, t.enc = true, nil
		} else {
			t.enc = append(t.enc, p[:n]...)
		}
	}
	return n, err
}

// WriteString avoids a copy for io.WriteString callers.
func (t *teeWriter) WriteString(s string) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	n, err := io.WriteString(t.w, s)
	if !t.overflow {
		if len(t.enc)-t.head+n > t.max {
			t.overflow, t.enc = true, nil
		} else {
			t.enc = append(t.enc, s[:n]...)
		}
	}
	return n, err
}

// finalStatus is the status the client saw: 200 when the handler wrote
// nothing.
func (t *teeWriter) finalStatus() int {
	if t.status == 0 {
		return http.StatusOK
	}
	return t.status
}

// encoded returns the replay encoding of what was written.
func (t *teeWriter) encoded() []byte {
	if t.status == 0 { // nothing written: net/http sends a bare 200
		return appendHead(nil, http.StatusOK, t.w.Header(), t.policy)
	}
	return t.enc
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
	hdr    http.Header
	status int
	header http.Header // snapshot at WriteHeader
	body   []byte      // all of it; the caller compares with its limit
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

func (b *bufferWriter) finalStatus() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// finalHeader is the header the client will get.
func (b *bufferWriter) finalHeader() http.Header {
	if b.status == 0 {
		return b.hdr
	}
	return b.header
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
