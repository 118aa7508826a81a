package httpidem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// codecVersion is the first byte of every stored response.
const codecVersion = 1

// errCodec is wrapped by every decoding error.
var errCodec = errors.New("httpidem: cannot decode stored response")

// The replay encoding, version 1:
//
//	byte     1 (the version)
//	uvarint  status
//	uvarint  number of header values
//	         per value: uvarint len(name), name, uvarint len(value), value
//	rest     the body, byte for byte
//
// Header names are written in canonical form and filtered by the header
// policy in that form; values keep the order the handler set them in.

// headerSnap is a copy of a header map's fields in flat slices: what a
// recorder takes at WriteHeader. Pooled with its recorder, it copies a
// header without allocating once its slices have grown.
type headerSnap struct {
	names []string
	ends  []int    // ends[i]: where names[i]'s values end in vals
	vals  []string // every field's values, one field after the other
	kept  []string // encode's scratch: each field's canonical name if kept, else ""
	taken bool
}

// take copies h.
func (s *headerSnap) take(h http.Header) {
	s.names, s.ends, s.vals, s.taken = s.names[:0], s.ends[:0], s.vals[:0], true
	for k, vs := range h {
		s.names = append(s.names, k)
		s.vals = append(s.vals, vs...)
		s.ends = append(s.ends, len(s.vals))
	}
}

// values returns field i's values (aliasing the snapshot).
func (s *headerSnap) values(i int) []string {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.vals[start:s.ends[i]:s.ends[i]]
}

// get returns the values of the field named exactly name.
func (s *headerSnap) get(name string) []string {
	for i, n := range s.names {
		if n == name {
			return s.values(i)
		}
	}
	return nil
}

// same reports whether h holds exactly the snapshot's fields and values.
func (s *headerSnap) same(h http.Header) bool {
	if len(h) != len(s.names) {
		return false
	}
	for i, n := range s.names {
		vs, ok := h[n]
		if !ok || !slices.Equal(vs, s.values(i)) {
			return false
		}
	}
	return true
}

// header returns the snapshot as a new map, its values copied.
func (s *headerSnap) header() http.Header {
	h := make(http.Header, len(s.names))
	for i, n := range s.names {
		h[n] = slices.Clone(s.values(i))
	}
	return h
}

// encode returns the whole encoding of a response with the snapshot's kept
// fields, in one allocation.
func (s *headerSnap) encode(status int, p *headerPolicy, body []byte) []byte {
	conn := s.get("Connection")
	// Each field is judged once: s.kept[i] is field i's canonical name, or
	// "" when it is not kept.
	s.kept = s.kept[:0]
	count, size := 0, 1+2*binary.MaxVarintLen64+len(body)
	for i, name := range s.names {
		name = http.CanonicalHeaderKey(name)
		if !p.keep(name, conn) {
			s.kept = append(s.kept, "")
			continue
		}
		s.kept = append(s.kept, name)
		for _, v := range s.values(i) {
			count++
			size += 2*binary.MaxVarintLen64 + len(name) + len(v)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(status))
	b = binary.AppendUvarint(b, uint64(count))
	for i, name := range s.kept {
		if name == "" {
			continue
		}
		for _, v := range s.values(i) {
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	clear(s.kept) // no strings kept alive by the pool
	return append(b, body...)
}

var snaps = sync.Pool{New: func() any { return new(headerSnap) }}

// encodeResponse returns the whole encoding of a response.
func encodeResponse(status int, header http.Header, p *headerPolicy, body []byte) []byte {
	s := snaps.Get().(*headerSnap)
	s.take(header)
	b := s.encode(status, p, body)
	clear(s.vals) // no strings kept alive by the pool
	snaps.Put(s)
	return b
}

// decodeResponse checks a stored response and, only when all of it is
// valid, adds its header fields to h. It returns the status and the body
// (which aliases b).
//
// A replay runs it on every duplicate, so it allocates at most twice: one
// string holding every name and value that is no common constant
// (headerName, headerValue), and one []string backing every field's values. Each field's slice is
// capped at its own values, so that appending to one never writes into the
// next.
func decodeResponse(b []byte, h http.Header) (int, []byte, error) {
	status, fields, body, err := parseHead(b)
	if err != nil {
		return 0, nil, err
	}
	if len(fields) == 0 {
		return status, body, nil
	}
	count, size := 0, 0
	for f := fields; len(f) > 0; count++ {
		name, rest, _ := cutField(f)
		value, rest, _ := cutField(rest)
		if _, ok := headerName(name); !ok {
			size += len(name)
		}
		if _, ok := headerValue(value); !ok {
			size += len(value)
		}
		f = rest
	}
	var text string // the names and values that are no constant, one after the other
	if size > 0 {
		var sb strings.Builder
		sb.Grow(size)
		for f := fields; len(f) > 0; {
			name, rest, _ := cutField(f)
			value, rest, _ := cutField(rest)
			if _, ok := headerName(name); !ok {
				sb.Write(name)
			}
			if _, ok := headerValue(value); !ok {
				sb.Write(value)
			}
			f = rest
		}
		text = sb.String()
	}
	vals := make([]string, count)
	last, start := "", 0 // the field the previous value went to, and where its values start in vals
	for i := 0; len(fields) > 0; i++ {
		name, rest, _ := cutField(fields)
		value, rest, _ := cutField(rest)
		fields = rest
		k, ok := headerName(name)
		if !ok {
			k, text = text[:len(name)], text[len(name):]
		}
		v, ok := headerValue(value)
		if !ok {
			v, text = text[:len(value)], text[len(value):]
		}
		vals[i] = v
		switch {
		case i > 0 && k == last:
			h[k] = vals[start : i+1 : i+1] // the field's values so far, grown in place
		case len(h[k]) > 0:
			h[k] = append(h[k], v) // the field was set before: add to it
			last = ""
		default:
			h[k] = vals[i : i+1 : i+1]
			last, start = k, i
		}
	}
	return status, body, nil
}

// parseHead validates the encoding and splits it into status, the encoded
// header fields, and the body.
func parseHead(b []byte) (status int, fields, body []byte, err error) {
	if len(b) == 0 {
		return 0, nil, nil, fmt.Errorf("%w: empty", errCodec)
	}
	if b[0] != codecVersion {
		return 0, nil, nil, fmt.Errorf("%w: unknown encoding version %d (this build reads version %d)", errCodec, b[0], codecVersion)
	}
	b = b[1:]
	st, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, nil, fmt.Errorf("%w: truncated status", errCodec)
	}
	if st < 200 || st > 999 {
		return 0, nil, nil, fmt.Errorf("%w: status %d out of range", errCodec, st)
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, nil, fmt.Errorf("%w: truncated header count", errCodec)
	}
	b = b[n:]
	if count > uint64(len(b)) { // every value takes at least two bytes
		return 0, nil, nil, fmt.Errorf("%w: header count %d larger than the data", errCodec, count)
	}
	start := b
	for i := uint64(0); i < count; i++ {
		name, rest, ok := cutField(b)
		if !ok || len(name) == 0 {
			return 0, nil, nil, fmt.Errorf("%w: truncated header name %d", errCodec, i)
		}
		_, rest, ok = cutField(rest)
		if !ok {
			return 0, nil, nil, fmt.Errorf("%w: truncated header value %d", errCodec, i)
		}
		b = rest
	}
	return int(st), start[:len(start)-len(b)], b, nil
}

func cutField(b []byte) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// headerName returns a common header name without allocating, and reports
// whether b is one.
func headerName(b []byte) (string, bool) {
	switch string(b) {
	case "Content-Type":
		return "Content-Type", true
	case "Location":
		return "Location", true
	case "Cache-Control":
		return "Cache-Control", true
	case "Etag":
		return "Etag", true
	case "Last-Modified":
		return "Last-Modified", true
	case "Content-Encoding":
		return "Content-Encoding", true
	case "Vary":
		return "Vary", true
	case "Content-Language":
		return "Content-Language", true
	case "Content-Disposition":
		return "Content-Disposition", true
	case "X-Content-Type-Options":
		return "X-Content-Type-Options", true
	case "Link":
		return "Link", true
	case "Expires":
		return "Expires", true
	}
	return "", false
}

// headerValue returns a common header value without allocating, and
// reports whether b is one.
func headerValue(b []byte) (string, bool) {
	switch string(b) {
	case "application/json":
		return "application/json", true
	case "application/json; charset=utf-8":
		return "application/json; charset=utf-8", true
	case "application/problem+json":
		return "application/problem+json", true
	case "text/plain; charset=utf-8":
		return "text/plain; charset=utf-8", true
	case "text/html; charset=utf-8":
		return "text/html; charset=utf-8", true
	case "no-store":
		return "no-store", true
	case "no-cache":
		return "no-cache", true
	case "nosniff":
		return "nosniff", true
	case "gzip":
		return "gzip", true
	case "Accept-Encoding":
		return "Accept-Encoding", true
	}
	return "", false
}
