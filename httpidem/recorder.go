package httpidem

import (
	"bufio"
	"context"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// teeWriter writes through to the client while capturing (lease mode): the
// client sees the response as the handler writes it, streaming included.
// What is kept is what the handler wrote, whatever the client's connection
// accepted: a client that went away mid-body does not shorten the record.
//
// The start of a response is held (up to holdMax bytes, until the handler
// flushes) so that, when the handler returns, finish can send it whole with
// a Content-Length and flush it: the client has its answer before the key is
// recorded, however long that takes. A response the handler streamed
// (flushed, or longer than holdMax) is flushed at finish; its chunked end
// follows when the middleware returns.
//
// It has no Unwrap, so a handler cannot write around the capture; the
// http.ResponseController methods that do not write (deadlines, full
// duplex) and Flush are forwarded to the client's writer.
type teeWriter struct {
	w         http.ResponseWriter
	max       int // body bytes kept at most
	status    int
	header    headerSnap // at WriteHeader
	clen      string     // the Content-Length finish sets, if any
	body      []byte
	size      int  // body bytes written, kept or not
	overflow  bool // the body was longer than max: not kept
	switched  bool // the handler answered 101 Switching Protocols
	held      []byte
	committed bool // the status line went to the client's writer
	prefixed  int8 // trailerPrefixed's answer: 0 not asked yet, 1 no, 2 yes
}

// pooledMax is the largest buffer a pooled recorder keeps for the next
// request.
const pooledMax = 64 << 10

// reset prepares a pooled recorder for a request writing to w, keeping its
// buffers.
func (t *teeWriter) reset(w http.ResponseWriter, maxBody int) {
	hs := t.header
	*t = teeWriter{w: w, max: maxBody, body: t.body[:0], held: t.held[:0]}
	t.header = headerSnap{names: hs.names[:0], ends: hs.ends[:0], vals: hs.vals[:0], kept: hs.kept[:0]}
}

// clear drops every reference a pooled recorder holds, and reports whether
// its buffers are small enough to keep.
func (t *teeWriter) clear() bool {
	body, held, hs := t.body, t.held, t.header
	*t = teeWriter{}
	if cap(body) > pooledMax || cap(held) > pooledMax || cap(hs.vals) > 256 {
		return false
	}
	clear(hs.names[:cap(hs.names)]) // no strings kept alive by the pool
	clear(hs.vals[:cap(hs.vals)])
	t.body, t.held = body[:0], held[:0]
	t.header = headerSnap{names: hs.names[:0], ends: hs.ends[:0], vals: hs.vals[:0], kept: hs.kept[:0]}
	return true
}

// holdMax is how much of a response's start is held back so that it can
// be sent with a Content-Length when the handler returns.
const holdMax = 4096

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.status != 0 {
		if t.committed {
			t.w.WriteHeader(code) // let net/http log the superfluous call
		}
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
	t.header.take(t.w.Header())
}

// commit sends the status line and what was held.
func (t *teeWriter) commit() error {
	if t.committed {
		return nil
	}
	t.committed = true
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	// net/http sends the header as it stood at WriteHeader: so does this
	// late WriteHeader, and what the handler set since (trailers) stays in
	// the map for net/http to read at the end.
	h := t.w.Header()
	if t.header.same(h) {
		// Unchanged since WriteHeader (the usual case): nothing to swap.
		if t.clen != "" {
			h["Content-Length"] = []string{t.clen}
		}
		t.w.WriteHeader(t.status)
		if t.clen != "" {
			delete(h, "Content-Length")
		}
	} else {
		now := h.Clone()
		clear(h)
		maps.Copy(h, t.header.header())
		if t.clen != "" {
			h["Content-Length"] = []string{t.clen}
		}
		t.w.WriteHeader(t.status)
		clear(h)
		maps.Copy(h, now)
	}
	if len(t.held) == 0 {
		return nil
	}
	held := t.held
	t.held = held[:0] // kept for the pool: nothing is held once committed
	_, err := t.w.Write(held)
	return err
}

func (t *teeWriter) capture(p []byte) {
	t.size += len(p)
	if t.overflow {
		return
	}
	if len(t.body)+len(p) > t.max {
		t.overflow, t.body = true, nil
		return
	}
	t.body = append(t.body, p...)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	t.capture(p)
	if !t.committed {
		if len(t.held)+len(p) <= holdMax {
			t.held = append(t.held, p...)
			return len(p), nil
		}
		if err := t.commit(); err != nil {
			return 0, err
		}
	}
	return t.w.Write(p)
}

// WriteString is Write for io.WriteString callers.
func (t *teeWriter) WriteString(s string) (int, error) { return t.Write([]byte(s)) }

// finish sends what is held, with a Content-Length when the handler set
// none and the status has a body, and flushes: called when the handler
// returned.
func (t *teeWriter) finish(method string) {
	if !t.committed {
		if t.status == 0 {
			t.WriteHeader(http.StatusOK)
		}
		h := t.w.Header()
		if first(h, "Content-Length") == "" && first(h, "Transfer-Encoding") == "" && len(h["Trailer"]) == 0 &&
			!t.trailerPrefixed(h) && bodyAllowed(t.status) && method != http.MethodHead {
			t.clen = strconv.Itoa(len(t.held))
		}
		_ = t.commit()
	}
	_ = flush(t.w)
}

// flush is http.NewResponseController(w).Flush without its allocations:
// the writer's FlushError or Flush, through Unwrap, or
// http.ErrNotSupported.
func flush(w http.ResponseWriter) error {
	for {
		switch f := w.(type) {
		case interface{ FlushError() error }:
			return f.FlushError()
		case http.Flusher:
			f.Flush()
			return nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = f.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

// first is h.Get for a name already in canonical form, without
// canonicalizing it again.
func first(h http.Header, canonical string) string {
	if vs := h[canonical]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// trailerPrefixed is hasTrailerPrefix(h), h being the client writer's
// header, asked once: finish and encoded both need it, and both run after
// the handler returned, when the header's names no longer change (commit
// sets and removes only Content-Length).
func (t *teeWriter) trailerPrefixed(h http.Header) bool {
	if t.prefixed == 0 {
		t.prefixed = 1
		if hasTrailerPrefix(h) {
			t.prefixed = 2
		}
	}
	return t.prefixed == 2
}

func hasTrailerPrefix(h http.Header) bool {
	for k := range h {
		if _, ok := cutTrailerPrefix(k); ok {
			return true
		}
	}
	return false
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
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
	if !t.header.taken { // nothing written: net/http sends a bare 200
		t.header.take(t.w.Header())
	}
	now := t.w.Header()
	if t.header.get("Trailer") == nil && !t.trailerPrefixed(now) {
		return t.header.encode(t.finalStatus(), p, t.body)
	}
	return encodeResponse(t.finalStatus(), withTrailers(t.header.header(), now), p, t.body)
}

// Flush sends buffered data to the client, when the client writer can.
func (t *teeWriter) Flush() { _ = t.FlushError() }

// FlushError is Flush for http.ResponseController.
func (t *teeWriter) FlushError() error {
	if err := t.commit(); err != nil {
		return err
	}
	return flush(t.w)
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
