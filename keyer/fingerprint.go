package keyer

import (
	"bytes"
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

// FingerprintOption configures a Fingerprinter.
type FingerprintOption func(*Fingerprinter)

// WithHeaders includes the named request headers (all their values, in
// order) in the fingerprint. Names are case-insensitive. By default no header
// is included.
func WithHeaders(names ...string) FingerprintOption {
	return func(f *Fingerprinter) {
		for _, n := range names {
			f.headers = append(f.headers, http.CanonicalHeaderKey(n))
		}
	}
}

// WithCanonicalJSON canonicalises JSON bodies before hashing (see
// CanonicalJSON): key order and whitespace then do not change the
// fingerprint; number and string values do. It applies to bodies whose
// Content-Type is application/json or ends in +json; other bodies, and JSON
// that cannot be canonicalised safely, are hashed as raw bytes under a
// different tag, so they can never collide with a canonical one.
func WithCanonicalJSON() FingerprintOption {
	return func(f *Fingerprinter) { f.json = true }
}

// WithoutFields leaves the named top-level members of a JSON object body out
// of the fingerprint (a client timestamp, a nonce). It implies
// WithCanonicalJSON. Names match exactly (case-sensitive).
func WithoutFields(names ...string) FingerprintOption {
	return func(f *Fingerprinter) {
		f.json = true
		f.omit = append(f.omit, names...)
	}
}

// WithMaxBody sets the largest body Fingerprint reads, in bytes; a longer
// body gives ErrBodyTooLarge. The default is DefaultMaxBody. n <= 0 keeps
// the default.
func WithMaxBody(n int64) FingerprintOption {
	return func(f *Fingerprinter) {
		if n > 0 {
			f.maxBody = n
		}
	}
}

// NewFingerprinter returns a Fingerprinter. With no options it hashes the
// method, the path and query, and the raw body of up to DefaultMaxBody bytes.
func NewFingerprinter(opts ...FingerprintOption) *Fingerprinter {
	f := &Fingerprinter{maxBody: DefaultMaxBody}
	for _, o := range opts {
		o(f)
	}
	slices.Sort(f.headers)
	f.headers = slices.Compact(f.headers)
	return f
}

// MaxBody returns the body size limit in bytes.
func (f *Fingerprinter) MaxBody() int64 { return f.maxBody }

// Fingerprint reads r's body (up to the limit), replaces r.Body with a
// reader over the same bytes so the handler can read it afterwards, and
// returns "v1:" followed by the hex SHA-256 of the method, the escaped path,
// the raw query, the chosen headers and the body, each length-prefixed so no
// two different requests hash the same input. The query is hashed as sent:
// "a=1&b=2" and "b=2&a=1" differ.
//
// A body longer than the limit gives an error matching ErrBodyTooLarge; a
// failure to read the body is returned wrapped.
func (f *Fingerprinter) Fingerprint(r *http.Request) (string, error) {
	body, err := f.readBody(r)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var scratch [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(scratch[:], uint64(len(s)))
		h.Write(scratch[:])
		io.WriteString(h, s)
	}
	io.WriteString(h, "idemkit fingerprint v1\x00")
	put(r.Method)
	put(r.URL.EscapedPath())
	put(r.URL.RawQuery)
	binary.BigEndian.PutUint64(scratch[:], uint64(len(f.headers)))
	h.Write(scratch[:])
	for _, name := range f.headers {
		vs := r.Header[name]
		put(name)
		binary.BigEndian.PutUint64(scratch[:], uint64(len(vs)))
		h.Write(scratch[:])
		for _, v := range vs {
			put(v)
		}
	}
	f.hashBody(h, r, body, &scratch)
	var sum [sha256.Size]byte
	var out [len(FingerprintVersion) + 1 + 2*sha256.Size]byte
	copy(out[:], FingerprintVersion+":")
	hex.Encode(out[len(FingerprintVersion)+1:], h.Sum(sum[:0]))
	return string(out[:]), nil
}

func (f *Fingerprinter) hashBody(h hash.Hash, r *http.Request, body []byte, scratch *[8]byte) {
	if f.json && isJSON(r.Header.Get("Content-Type")) {
		if c, err := canonicalJSON(nil, body, f.omit); err == nil {
			h.Write([]byte{'j'})
			binary.BigEndian.PutUint64(scratch[:], uint64(len(c)))
			h.Write(scratch[:])
			h.Write(c)
			return
		}
	}
	h.Write([]byte{'r'})
	binary.BigEndian.PutUint64(scratch[:], uint64(len(body)))
	h.Write(scratch[:])
	h.Write(body)
}

func (f *Fingerprinter) readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > f.maxBody {
		return nil, fmt.Errorf("%w: Content-Length %d is over the limit of %d bytes", ErrBodyTooLarge, r.ContentLength, f.maxBody)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1)
	} else {
		buf.Grow(512)
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("keyer: read request body: %w", err)
	}
	if n > f.maxBody {
		return nil, fmt.Errorf("%w: more than the limit of %d bytes", ErrBodyTooLarge, f.maxBody)
	}
	body := buf.Bytes()
	r.Body = &replayBody{Reader: bytes.NewReader(body), orig: r.Body}
	return body, nil
}

// replayBody serves the bytes already read and closes the original body.
type replayBody struct {
	*bytes.Reader
	orig io.ReadCloser
}

func (b *replayBody) Close() error { return b.orig.Close() }

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
