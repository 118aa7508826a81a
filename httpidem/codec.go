package httpidem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
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

// appendHead appends the version, status and kept header fields.
func appendHead(b []byte, status int, header http.Header, p *headerPolicy) []byte {
	conn := header["Connection"]
	count := 0
	for name, vs := range header {
		if p.keep(http.CanonicalHeaderKey(name), conn) {
			count += len(vs)
		}
	}
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(status))
	b = binary.AppendUvarint(b, uint64(count))
	for name, vs := range header {
		name = http.CanonicalHeaderKey(name)
		if !p.keep(name, conn) {
			continue
		}
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// encodeResponse returns the whole encoding of a response.
func encodeResponse(status int, header http.Header, p *headerPolicy, body []byte) []byte {
	b := make([]byte, 0, 64+len(body))
	return append(appendHead(b, status, header, p), body...)
}

// decodeResponse checks a stored response and, only when all of it is
// valid, adds its header fields to h. It returns the status and the body
// (which aliases b).
func decodeResponse(b []byte, h http.Header) (int, []byte, error) {
	status, fields, body, err := parseHead(b)
	if err != nil {
		return 0, nil, err
	}
	for len(fields) > 0 {
		name, rest, _ := cutField(fields)
		value, rest, _ := cutField(rest)
		k := headerName(name)
		h[k] = append(h[k], string(value))
		fields = rest
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

// headerName returns a common header name without allocating.
func headerName(b []byte) string {
	switch string(b) {
	case "Content-Type":
		return "Content-Type"
	case "Location":
		return "Location"
	case "Cache-Control":
		return "Cache-Control"
	case "Etag":
		return "Etag"
	case "Last-Modified":
		return "Last-Modified"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Vary":
		return "Vary"
	}
	return string(b)
}
