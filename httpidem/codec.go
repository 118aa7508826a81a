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

// response is a kept response: what a replay writes back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// encodeResponse writes the replay encoding, version 1:
//
//	byte     1 (the version)
//	uvarint  status
//	uvarint  number of header values
//	         per value: uvarint len(name), name, uvarint len(value), value
//	rest     the body, byte for byte
//
// Header names are written in canonical form (and filtered by keep in that
// form); values in the order the handler set them.
func encodeResponse(status int, header http.Header, keep func(string) bool, body []byte) []byte {
	n := 1 + binary.MaxVarintLen64*2 + len(body)
	count := 0
	for name, vs := range header {
		if !keep(http.CanonicalHeaderKey(name)) {
			continue
		}
		for _, v := range vs {
			n += 2*binary.MaxVarintLen64 + len(name) + len(v)
			count++
		}
	}
	b := make([]byte, 0, n)
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(status))
	b = binary.AppendUvarint(b, uint64(count))
	for name, vs := range header {
		name = http.CanonicalHeaderKey(name)
		if !keep(name) {
			continue
		}
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, body...)
}

// decodeResponse reverses encodeResponse. The body aliases b.
func decodeResponse(b []byte) (response, error) {
	var r response
	if len(b) == 0 {
		return r, fmt.Errorf("%w: empty", errCodec)
	}
	if b[0] != codecVersion {
		return r, fmt.Errorf("%w: unknown encoding version %d (this build reads version %d)", errCodec, b[0], codecVersion)
	}
	b = b[1:]
	status, n := binary.Uvarint(b)
	if n <= 0 {
		return r, fmt.Errorf("%w: truncated status", errCodec)
	}
	if status < 200 || status > 999 {
		return r, fmt.Errorf("%w: status %d out of range", errCodec, status)
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return r, fmt.Errorf("%w: truncated header count", errCodec)
	}
	b = b[n:]
	if count > uint64(len(b)) { // every value takes at least two bytes
		return r, fmt.Errorf("%w: header count %d larger than the data", errCodec, count)
	}
	r.status = int(status)
	if count > 0 {
		r.header = make(http.Header, count)
	}
	for i := uint64(0); i < count; i++ {
		name, rest, ok := cutField(b)
		if !ok || len(name) == 0 {
			return response{}, fmt.Errorf("%w: truncated header name %d", errCodec, i)
		}
		value, rest, ok := cutField(rest)
		if !ok {
			return response{}, fmt.Errorf("%w: truncated header value %d", errCodec, i)
		}
		k := string(name)
		r.header[k] = append(r.header[k], string(value))
		b = rest
	}
	r.body = b
	return r, nil
}

func cutField(b []byte) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}
