package keyer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting Canonicalize follows; deeper documents are
// not canonicalised.
const maxJSONDepth = 256

var errNotCanonical = errors.New("keyer: not canonicalisable JSON")

// CanonicalJSON returns a canonical form of one JSON document: object members
// sorted by name (byte order of the decoded name), no insignificant
// whitespace, strings re-encoded from their decoded value, and numbers kept
// exactly as written. Top-level object members named in omit are left out.
//
// Two documents with the same canonical form hold the same values: the same
// names with the same strings, the same number literals, the same nesting.
// Numbers are deliberately not normalised: 1990, 1990.0 and 1.99e3 stay
// different, because a server may well treat them differently and a false
// "same request" (a replay of the wrong answer) is worse than a false
// "different request" (a 422 the client can understand). Strings compare by
// value, so "\u0041" and "A" are the same.
//
// It reports false, and the caller should hash the raw bytes instead, for
// anything it cannot canonicalise safely: invalid JSON, invalid UTF-8 (which
// a decoder would silently replace), an object with a duplicated member name
// (parsers disagree on which one wins), trailing data after the document, or
// nesting deeper than 256.
func CanonicalJSON(body []byte, omit ...string) ([]byte, bool) {
	out, err := canonicalJSON(nil, body, omit)
	return out, err == nil
}

func canonicalJSON(dst, body []byte, omit []string) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, errNotCanonical
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	c := canon{dec: dec, omit: omit}
	out, err := c.value(dst, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotCanonical
	}
	return out, nil
}

type canon struct {
	dec  *json.Decoder
	omit []string
}

type member struct {
	name string
	val  []byte
}

func (c *canon) value(dst []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, errNotCanonical
	}
	tok, err := c.dec.Token()
	if err != nil {
		return nil, errNotCanonical
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var ms []member
			for c.dec.More() {
				nt, err := c.dec.Token()
				if err != nil {
					return nil, errNotCanonical
				}
				name, ok := nt.(string)
				if !ok {
					return nil, errNotCanonical
				}
				v, err := c.value(nil, depth+1)
				if err != nil {
					return nil, err
				}
				if depth == 0 && slices.Contains(c.omit, name) {
					continue
				}
				ms = append(ms, member{name, v})
			}
			if end, err := c.dec.Token(); err != nil || end != json.Delim('}') {
				return nil, errNotCanonical
			}
			slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
			for i := 1; i < len(ms); i++ {
				if ms[i].name == ms[i-1].name {
					return nil, errNotCanonical
				}
			}
			dst = append(dst, '{')
			for i, m := range ms {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendString(dst, m.name)
				dst = append(dst, ':')
				dst = append(dst, m.val...)
			}
			return append(dst, '}'), nil
		case '[':
			dst = append(dst, '[')
			first := true
			for c.dec.More() {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				if dst, err = c.value(dst, depth+1); err != nil {
					return nil, err
				}
			}
			if end, err := c.dec.Token(); err != nil || end != json.Delim(']') {
				return nil, errNotCanonical
			}
			return append(dst, ']'), nil
		}
		return nil, errNotCanonical
	case string:
		return appendString(dst, t), nil
	case json.Number:
		return append(dst, t...), nil
	case bool:
		if t {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case nil:
		return append(dst, "null"...), nil
	}
	return nil, errNotCanonical
}

// appendString writes s as a JSON string: quote, backslash and control
// characters escaped, everything else as UTF-8. The output depends only on s.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
