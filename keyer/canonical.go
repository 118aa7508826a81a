package keyer

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting CanonicalJSON follows; deeper documents are
// not canonicalised.
const maxJSONDepth = 256

var errNotCanonical = errors.New("keyer: not canonicalisable JSON")

// CanonicalJSON returns a canonical form of one JSON document (RFC 8259):
// object members sorted by name (byte order of the decoded name), no
// insignificant whitespace, strings re-encoded from their decoded value, and
// numbers kept exactly as written. Top-level object members named in omit
// are left out.
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
// anything it cannot canonicalise safely: invalid JSON, invalid UTF-8 or a
// lone UTF-16 surrogate escape (which decoders silently replace), an object
// with a duplicated member name (parsers disagree on which one wins),
// trailing data after the document, or nesting deeper than 256. Member
// names are duplicated when they are equal ignoring case, as encoding/json
// compares them when it fills a struct ({"amount":1,"AMOUNT":1000} decodes
// as 1000, {"AMOUNT":1000,"amount":1} as 1): hashed raw, the two keep
// different fingerprints, so neither replays the other's answer.
func CanonicalJSON(body []byte, omit ...string) ([]byte, bool) {
	out, err := canonicalJSON(nil, body, omit)
	return out, err == nil
}

func canonicalJSON(dst, body []byte, omit []string) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, errNotCanonical
	}
	p := parser{in: body, omit: omit}
	p.ws()
	out, err := p.value(dst, 0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, errNotCanonical
	}
	return out, nil
}

// parser is a small recursive-descent JSON parser that writes the canonical
// form as it goes. It is about two orders of magnitude faster than
// json.Decoder.Token, which matters for bodies near the size limit.
type parser struct {
	in   []byte
	pos  int
	omit []string
}

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, errNotCanonical
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(dst, depth)
	case c == '[':
		return p.array(dst, depth)
	case c == '"':
		s, err := p.str(nil)
		if err != nil {
			return nil, err
		}
		return appendString(dst, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
			p.pos += len(lit)
			return append(dst, lit...), nil
		}
	}
	return nil, errNotCanonical
}

type member struct {
	name       string
	start, end int // the canonical value in the object's buffer
}

func (p *parser) object(dst []byte, depth int) ([]byte, error) {
	if depth >= maxJSONDepth {
		return nil, errNotCanonical
	}
	p.pos++ // '{'
	p.ws()
	var ms []member
	var vals []byte
	var folded []string // every member's name, omitted ones too, case-folded
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, errNotCanonical
		}
		nameBytes, err := p.str(nil)
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, errNotCanonical
		}
		p.pos++
		p.ws()
		start := len(vals)
		if vals, err = p.value(vals, depth+1); err != nil {
			return nil, err
		}
		name := string(nameBytes)
		folded = append(folded, foldName(name))
		if depth == 0 && slices.Contains(p.omit, name) {
			vals = vals[:start]
		} else {
			ms = append(ms, member{name, start, len(vals)})
		}
		p.ws()
		if p.pos >= len(p.in) {
			return nil, errNotCanonical
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, errNotCanonical
		}
		p.pos++
		break
	}
	// encoding/json matches member names to struct fields without regard
	// to case, and the last of several matching members wins: names that
	// are equal when case-folded (exact duplicates among them) make the
	// document's meaning depend on member order, which canonical form
	// throws away. Such a document is not canonicalised.
	if len(folded) > 1 {
		slices.Sort(folded)
		for i := 1; i < len(folded); i++ {
			if folded[i] == folded[i-1] {
				return nil, errNotCanonical
			}
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, []byte(m.name))
		dst = append(dst, ':')
		dst = append(dst, vals[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

func (p *parser) array(dst []byte, depth int) ([]byte, error) {
	if depth >= maxJSONDepth {
		return nil, errNotCanonical
	}
	p.pos++ // '['
	p.ws()
	dst = append(dst, '[')
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for {
		p.ws()
		var err error
		if dst, err = p.value(dst, depth+1); err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.in) {
			return nil, errNotCanonical
		}
		if p.in[p.pos] == ',' {
			p.pos++
			dst = append(dst, ',')
			continue
		}
		if p.in[p.pos] != ']' {
			return nil, errNotCanonical
		}
		p.pos++
		return append(dst, ']'), nil
	}
}

// number copies a number literal after checking its grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (p *parser) number(dst []byte) ([]byte, error) {
	in, i := p.in, p.pos
	digits := func() int {
		n := 0
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case digits() == 0:
		return nil, errNotCanonical
	}
	if i < len(in) && in[i] == '.' {
		i++
		if digits() == 0 {
			return nil, errNotCanonical
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, errNotCanonical
		}
	}
	dst = append(dst, in[p.pos:i]...)
	p.pos = i
	return dst, nil
}

// str decodes the string at p.pos (its opening quote) into dst.
func (p *parser) str(dst []byte) ([]byte, error) {
	in := p.in
	i := p.pos + 1
	for {
		// Copy the run of plain characters at once.
		j := i
		for j < len(in) && in[j] != '"' && in[j] != '\\' && in[j] >= 0x20 {
			j++
		}
		dst = append(dst, in[i:j]...)
		i = j
		if i >= len(in) || in[i] < 0x20 {
			return nil, errNotCanonical
		}
		if in[i] == '"' {
			p.pos = i + 1
			return dst, nil
		}
		// A backslash escape.
		if i+1 >= len(in) {
			return nil, errNotCanonical
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
			i += 2
		case 'b':
			dst, i = append(dst, '\b'), i+2
		case 'f':
			dst, i = append(dst, '\f'), i+2
		case 'n':
			dst, i = append(dst, '\n'), i+2
		case 'r':
			dst, i = append(dst, '\r'), i+2
		case 't':
			dst, i = append(dst, '\t'), i+2
		case 'u':
			r, ok := hex4(in, i+2)
			if !ok {
				return nil, errNotCanonical
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by a low one is a character.
				r2, ok := rune(0), false
				if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
					r2, ok = hex4(in, i+2)
				}
				c := utf16.DecodeRune(r, r2)
				if !ok || c == utf8.RuneError {
					return nil, errNotCanonical
				}
				r = c
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return nil, errNotCanonical
		}
	}
}

func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendString writes s as a JSON string: quote, backslash and control
// characters escaped, everything else as UTF-8. The output depends only on s.
func appendString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
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

// foldName returns name with every character replaced by the smallest
// character of its Unicode simple case-folding orbit, so that
// foldName(a) == foldName(b) exactly when strings.EqualFold(a, b), the
// comparison encoding/json uses for member names.
func foldName(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// k and s fold with the Kelvin sign and the long s, which are not
		// ASCII: an all-ASCII name folds to its lower case.
		return strings.ToLower(name)
	}
	var b strings.Builder
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		if least < utf8.RuneSelf && least >= 'A' && least <= 'Z' {
			least += 'a' - 'A' // as the ASCII path: K (and the Kelvin sign) fold to k
		}
		b.WriteRune(least)
	}
	return b.String()
}
