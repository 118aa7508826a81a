package keyer

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Header is the canonical name of the Idempotency-Key header field.
const Header = "Idempotency-Key"

// MaxKeyLen is the longest client key, in characters (all ASCII, so also
// in bytes): the limit of the Idempotency-Key a client sends, which Parse,
// CheckKey, httpidem and idemclient all apply (idemclient.MaxKeyLen is this
// constant). It is not the limit of a store key (store.MaxKeyLen, equal to
// MaxStoreKeyLen), which holds the client's key with its scope.
const MaxKeyLen = 255

// Sentinel errors matched by errors.Is on the *KeyError that Parse and
// ParseValue return.
var (
	// ErrNoKey: the request has no Idempotency-Key header.
	ErrNoKey = errors.New("keyer: no Idempotency-Key header")
	// ErrManyKeys: the request has more than one Idempotency-Key header
	// (or one that holds a list of values).
	ErrManyKeys = errors.New("keyer: more than one Idempotency-Key")
	// ErrMalformedKey: the value is not a valid key.
	ErrMalformedKey = errors.New("keyer: malformed Idempotency-Key")
)

// Reason says what is wrong with an Idempotency-Key header.
type Reason uint8

// The reasons a key is rejected.
const (
	// ReasonMissing: no Idempotency-Key header. Matches ErrNoKey.
	ReasonMissing Reason = iota + 1
	// ReasonMultiple: more than one header, or a comma-separated list.
	// Matches ErrManyKeys.
	ReasonMultiple
	// ReasonEmpty: the value is empty, only whitespace, or the empty string
	// "". Matches ErrMalformedKey, as do all the reasons below.
	ReasonEmpty
	// ReasonNull: the value is null, bare or quoted.
	ReasonNull
	// ReasonTooLong: more than MaxKeyLen characters.
	ReasonTooLong
	// ReasonBadChar: a character outside visible ASCII (0x21-0x7E), or a
	// quote or backslash in the bare form.
	ReasonBadChar
	// ReasonBadString: a quoted string that is unterminated, has an invalid
	// escape, or is followed by anything but whitespace.
	ReasonBadString
)

// String returns a short lower-case name for the reason.
func (r Reason) String() string {
	switch r {
	case ReasonMissing:
		return "missing"
	case ReasonMultiple:
		return "multiple"
	case ReasonEmpty:
		return "empty"
	case ReasonNull:
		return "null"
	case ReasonTooLong:
		return "too long"
	case ReasonBadChar:
		return "bad character"
	case ReasonBadString:
		return "bad string"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// KeyError reports why an Idempotency-Key header was rejected. Its message is
// meant for the client (it quotes no more of the value than a position).
type KeyError struct {
	Reason Reason
	// Detail says what is wrong in a sentence fit for an HTTP problem
	// response.
	Detail string
}

// Error returns "keyer: " followed by the detail.
func (e *KeyError) Error() string { return "keyer: " + e.Detail }

// Is makes errors.Is match ErrNoKey, ErrManyKeys or ErrMalformedKey according
// to the reason.
func (e *KeyError) Is(target error) bool {
	switch e.Reason {
	case ReasonMissing:
		return target == ErrNoKey
	case ReasonMultiple:
		return target == ErrManyKeys
	}
	return target == ErrMalformedKey
}

func keyErr(r Reason, detail string) *KeyError { return &KeyError{Reason: r, Detail: detail} }

// Parse returns the idempotency key of a request's header. It accepts exactly
// one Idempotency-Key field whose value is a Structured Field string (quoted,
// as the IETF draft says) or a bare token, and returns the key without quotes
// or escapes. Errors are *KeyError.
func Parse(h http.Header) (string, error) {
	vs := h[Header] // h.Values(Header) without canonicalizing a canonical name again
	switch len(vs) {
	case 0:
		return "", keyErr(ReasonMissing, "the Idempotency-Key header is required")
	case 1:
		return ParseValue(vs[0])
	}
	return "", keyErr(ReasonMultiple, "the request has "+strconv.Itoa(len(vs))+" Idempotency-Key headers; send exactly one")
}

// ParseValue parses one Idempotency-Key field value, as Parse does.
//
// The quoted form follows RFC 8941 §3.3.3: the characters between the quotes
// are printable ASCII, and a backslash escapes only a quote or a backslash.
// Parameters after the string (;name=value) are rejected rather than
// silently ignored. The unquoted key must then be 1 to MaxKeyLen visible
// ASCII characters: spaces are not allowed inside a key. The bare form is the
// key itself: visible ASCII without quote, backslash or comma (a comma means
// a list, which a proxy produces when it folds several headers into one).
// Leading and trailing spaces and tabs around the value are ignored.
// "null" is rejected in both forms, as is an empty value.
func ParseValue(v string) (string, error) {
	v = trimOWS(v)
	if v == "" {
		return "", keyErr(ReasonEmpty, "the Idempotency-Key header is empty")
	}
	var key string
	if v[0] == '"' {
		k, err := parseSFString(v)
		if err != nil {
			return "", err
		}
		key = k
	} else {
		for i := 0; i < len(v); i++ {
			switch c := v[i]; {
			case c == ',':
				return "", keyErr(ReasonMultiple, "the Idempotency-Key header holds a list (a comma at position "+strconv.Itoa(i+1)+"); send exactly one key")
			case c == '"' || c == '\\':
				return "", keyErr(ReasonBadChar, "the Idempotency-Key has a quote or backslash at position "+strconv.Itoa(i+1)+"; quote the whole key as a string, or send it bare without them")
			case c < 0x21 || c > 0x7e:
				return "", keyErr(ReasonBadChar, "the Idempotency-Key has a character outside visible ASCII at position "+strconv.Itoa(i+1))
			}
		}
		// Visible ASCII only, checked above: what is left of checkKey.
		if err := checkVisibleKey(v); err != nil {
			return "", err
		}
		return v, nil
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// checkKey applies the rules both forms share to an unquoted key.
func checkKey(key string) error {
	switch {
	case key == "":
		return keyErr(ReasonEmpty, "the Idempotency-Key is an empty string")
	case strings.Trim(key, " \t") == "":
		return keyErr(ReasonEmpty, "the Idempotency-Key is only whitespace")
	}
	if err := checkVisibleKey(key); err != nil {
		return err
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return keyErr(ReasonBadChar, "the Idempotency-Key has a character outside visible ASCII at position "+strconv.Itoa(i+1)+" of the key")
		}
	}
	return nil
}

// checkVisibleKey applies the rules of checkKey that a non-empty key of
// visible ASCII alone (a bare key, checked character by character as it
// was parsed) may still break, in checkKey's order.
func checkVisibleKey(key string) error {
	switch {
	case key == "null":
		return keyErr(ReasonNull, "the Idempotency-Key is null")
	case len(key) > MaxKeyLen:
		return keyErr(ReasonTooLong, "the Idempotency-Key is "+strconv.Itoa(len(key))+" characters long; the limit is "+strconv.Itoa(MaxKeyLen))
	}
	return nil
}

// parseSFString parses a quoted Structured Field string that must fill v.
func parseSFString(v string) (string, error) {
	// v[0] == '"'. Fast path: no escapes.
	var buf []byte
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i+1 >= len(v) {
				return "", keyErr(ReasonBadString, "the Idempotency-Key string ends inside an escape")
			}
			n := v[i+1]
			if n != '"' && n != '\\' {
				return "", keyErr(ReasonBadString, "the Idempotency-Key string has an invalid escape at position "+strconv.Itoa(i+1)+" (only \\\" and \\\\ are allowed)")
			}
			if buf == nil {
				buf = append(make([]byte, 0, len(v)), v[1:i]...)
			}
			buf = append(buf, n)
			i++
		case c == '"':
			if i != len(v)-1 {
				return "", keyErr(ReasonBadString, "the Idempotency-Key string is followed by other characters at position "+strconv.Itoa(i+2)+"; parameters are not accepted")
			}
			if buf == nil {
				return v[1:i], nil
			}
			return string(buf), nil
		case c < 0x20 || c > 0x7e:
			return "", keyErr(ReasonBadChar, "the Idempotency-Key string has a character outside printable ASCII at position "+strconv.Itoa(i+1))
		default:
			if buf != nil {
				buf = append(buf, c)
			}
		}
	}
	return "", keyErr(ReasonBadString, "the Idempotency-Key string has no closing quote")
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
