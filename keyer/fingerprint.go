package keyer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/internal/fphook"
	"github.com/idemkit/idemkit/internal/invalid"
)

// FingerprintVersion prefixes every fingerprint, followed by a colon. It
// changes whenever the algorithm does.
const FingerprintVersion = "v1"

// DefaultMaxBody is the body size limit of a Fingerprinter made without
// WithMaxBody: 1 MiB.
const DefaultMaxBody = 1 << 20

// ErrBodyTooLarge is returned by Fingerprint when the request body is longer
// than the limit. HTTP callers answer it with 413 Content Too Large.
var ErrBodyTooLarge = errors.New("keyer: request body too large")

// A Fingerprinter computes request fingerprints. Make one with
// NewFingerprinter and share it: it is safe for concurrent use.
type Fingerprinter struct {
	headers []string // canonical names, sorted, unique
	json    bool
	omit    []string
	maxBody int64
}

// FingerprintOption configures a Fingerprinter. An option returns an error
// for a value it cannot use; NewFingerprinter reports it (matching
// ErrInvalid) and builds nothing.
type FingerprintOption func(*Fingerprinter) error

// WithHeaders includes the named request headers (all their values, in
// order) in the fingerprint. Names are case-insensitive. By default no header
// is included. A name that is not an HTTP token ("", "bad header"), or no
// name at all, is an error at NewFingerprinter.
func WithHeaders(names ...string) FingerprintOption {
	return func(f *Fingerprinter) error {
		if len(names) == 0 {
			return errors.New("WithHeaders(): pass at least one header name, or leave the option out")
		}
		for _, n := range names {
			c, err := CanonicalHeader(n)
			if err != nil {
				return fmt.Errorf("WithHeaders: %w", err)
			}
			f.headers = append(f.headers, c)
		}
		return nil
	}
}

// WithCanonicalJSON canonicalises JSON bodies before hashing (see
// CanonicalJSON): key order and whitespace then do not change the
// fingerprint; number and string values do. It applies to bodies whose
// Content-Type is application/json or ends in +json; other bodies, and JSON
// that cannot be canonicalised safely (member names that differ only in
// case among them), are hashed as raw bytes under a different tag, so they
// can never collide with a canonical one.
func WithCanonicalJSON() FingerprintOption {
	return func(f *Fingerprinter) error { f.json = true; return nil }
}

// WithoutFields leaves the named top-level members of a JSON object body out
// of the fingerprint (a client timestamp, a nonce). It implies
// WithCanonicalJSON. Names match exactly (case-sensitive); a body that also
// holds a member whose name differs from an omitted one only in case is
// hashed raw (see CanonicalJSON). An empty name, or no name at all, is an
// error at NewFingerprinter.
func WithoutFields(names ...string) FingerprintOption {
	return func(f *Fingerprinter) error {
		if len(names) == 0 {
			return errors.New("WithoutFields(): pass at least one member name, or leave the option out")
		}
		if slices.Contains(names, "") {
			return errors.New(`WithoutFields: empty member name: pass the names of the members to leave out`)
		}
		f.json = true
		f.omit = append(f.omit, names...)
		return nil
	}
}

// WithMaxBody sets the largest body Fingerprint reads, in bytes; a longer
// body gives ErrBodyTooLarge. The default is DefaultMaxBody. A limit that is
// not positive is an error at NewFingerprinter.
func WithMaxBody(n int64) FingerprintOption {
	return func(f *Fingerprinter) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxBody(%d): pass a positive number of bytes", n)
		}
		f.maxBody = n
		return nil
	}
}

// NewFingerprinter returns a Fingerprinter. With no options it hashes the
// method, the path and query, and the raw body of up to DefaultMaxBody bytes.
// A nil option or an invalid value is an error matching ErrInvalid (and
// store.ErrInvalid), which names the option and what to pass instead.
func NewFingerprinter(opts ...FingerprintOption) (*Fingerprinter, error) {
	f := &Fingerprinter{maxBody: DefaultMaxBody}
	if err := invalid.Apply(f, opts); err != nil {
		return nil, fmt.Errorf("keyer: new fingerprinter: %w", err)
	}
	slices.Sort(f.headers)
	f.headers = slices.Compact(f.headers)
	return f, nil
}

// MaxBody returns the body size limit in bytes.
func (f *Fingerprinter) MaxBody() int64 { return f.maxBody }

// Fingerprint reads r's body (up to the limit), replaces r.Body with a
// reader over the same bytes so the handler can read it afterwards (it is
// also an io.Seeker, so a handler run again can read it from the start), and
// returns "v1:" followed by the hex SHA-256 of the method, the escaped path,
// the raw query, the chosen headers and the body, each length-prefixed so no
// two different requests hash the same input. The query is hashed as sent:
// "a=1&b=2" and "b=2&a=1" differ.
//
// A body longer than the limit gives an error matching ErrBodyTooLarge; a
// failure to read the body is returned wrapped.
func (f *Fingerprinter) Fingerprint(r *http.Request) (string, error) {
	body, err := f.readBody(r, nil)
	if err != nil {
		return "", err
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &replayBody{b: body, orig: r.Body}
	}
	return f.sum(r, body), nil
}

// fingerprintInto is Fingerprint for a caller that hands the body on
// itself (httpidem's lease mode, through internal/fphook): it reads the
// body into buf's array (grown if too small) and leaves r.Body drained,
// so the caller can reuse buf once the handler is done with the body.
func fingerprintInto(f any, r *http.Request, buf []byte) (fp string, body []byte, err error) {
	fr := f.(*Fingerprinter)
	if body, err = fr.readBody(r, buf[:0]); err != nil {
		return "", body, err
	}
	return fr.sum(r, body), body, nil
}

func init() { fphook.Fingerprint = fingerprintInto }

// sum returns the fingerprint of r with body as its body.
func (f *Fingerprinter) sum(r *http.Request, body []byte) string {
	st := statePool.Get().(*fpState)
	defer statePool.Put(st)
	st.h.Reset()
	// The small fields go through one reused buffer, then the body.
	b := append(st.buf[:0], "idemkit fingerprint v1\x00"...)
	b = appendField(b, r.Method)
	b = appendField(b, r.URL.EscapedPath())
	b = appendField(b, r.URL.RawQuery)
	b = binary.BigEndian.AppendUint64(b, uint64(len(f.headers)))
	for _, name := range f.headers {
		vs := r.Header[name]
		b = appendField(b, name)
		b = binary.BigEndian.AppendUint64(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendField(b, v)
		}
	}
	tag, hashed := byte('r'), body
	if f.json && isJSON(r.Header.Get("Content-Type")) {
		if c, err := canonicalJSON(nil, body, f.omit); err == nil {
			tag, hashed = 'j', c
		}
	}
	b = append(b, tag)
	b = binary.BigEndian.AppendUint64(b, uint64(len(hashed)))
	st.buf = b
	st.h.Write(b)
	st.h.Write(hashed)
	var out [len(FingerprintVersion) + 1 + 2*sha256.Size]byte
	copy(out[:], FingerprintVersion+":")
	hex.Encode(out[len(FingerprintVersion)+1:], st.h.Sum(st.sum[:0]))
	return string(out[:])
}

// fpState is the reusable part of one Fingerprint call.
type fpState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

var statePool = sync.Pool{New: func() any { return &fpState{h: sha256.New(), buf: make([]byte, 0, 256)} }}

// appendField appends len(s) as 8 bytes, then s.
func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// readBody reads r's body, up to the limit, into buf's array (a new one
// when buf is too small for its Content-Length, grown for a body of unknown
// length) and returns it; r.Body is left drained. On an error it returns
// the buffer it used, emptied, for the caller to reuse.
func (f *Fingerprinter) readBody(r *http.Request, buf []byte) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return buf[:0], nil
	}
	if r.ContentLength > f.maxBody {
		return buf[:0], fmt.Errorf("%w: Content-Length %d is over the limit of %d bytes", ErrBodyTooLarge, r.ContentLength, f.maxBody)
	}
	// Read into one buffer sized from Content-Length (plus one byte to see
	// the end), growing only for bodies of unknown length.
	size := int64(512)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1
	}
	limit := f.maxBody + 1
	if want := int(min(size, limit)); cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				return buf[:0], fmt.Errorf("%w: more than the limit of %d bytes", ErrBodyTooLarge, f.maxBody)
			}
			buf = slices.Grow(buf, int(min(int64(cap(buf)), limit-int64(cap(buf)))))
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > f.maxBody {
			return buf[:0], fmt.Errorf("%w: more than the limit of %d bytes", ErrBodyTooLarge, f.maxBody)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf[:0], fmt.Errorf("keyer: read request body: %w", err)
		}
	}
	return buf, nil
}

// replayBody serves the bytes already read and closes the original body.
type replayBody struct {
	b    []byte
	off  int
	orig io.ReadCloser
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

// WriteTo lets io.Copy skip its own buffer.
func (b *replayBody) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.b[b.off:])
	b.off += n
	return int64(n), err
}

func (b *replayBody) Close() error { return b.orig.Close() }

// Seek moves the read offset, so a handler that runs again for the same
// request (transactional mode, when the database rolled the first attempt
// back and the store runs the transaction again) reads the body from the
// start.
func (b *replayBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += int64(b.off)
	case io.SeekEnd:
		offset += int64(len(b.b))
	case io.SeekStart:
	default:
		return int64(b.off), errors.New("keyer: seek request body: invalid whence")
	}
	if offset < 0 || offset > int64(len(b.b)) {
		return int64(b.off), errors.New("keyer: seek request body: offset out of range")
	}
	b.off = int(offset)
	return offset, nil
}

// isJSON reports whether a Content-Type names JSON: application/json or a
// +json suffix, parameters ignored.
func isJSON(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	return strings.EqualFold(ct, "application/json") ||
		(len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json"))
}
