package keyer

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxStoreKeyLen is the longest store key ScopedKey returns, in bytes. It
// equals store.MaxKeyLen, the longest key every idemkit backend accepts
// (keyer does not import package store).
const MaxStoreKeyLen = 1024

// MaxScopeLen is how many bytes of scope (all parts with their length
// prefixes) always fit beside a client key of MaxKeyLen characters.
const MaxScopeLen = MaxStoreKeyLen - MaxKeyLen - 4 // 4 = len("255:")

// ErrBadScope is matched by errors.Is on the error ScopedKey returns when the
// scope parts cannot form a store key: too long together, not valid UTF-8, or
// holding a NUL byte. It is a server-side problem (the scope comes from the
// server's own authentication), so HTTP callers answer it with a 500.
var ErrBadScope = errors.New("keyer: invalid scope")

// ScopedKey composes scope parts (for example tenant, user, route) and the
// client's key into one store key.
//
// Every part, the key included, is written as its length in bytes, a colon,
// and the bytes themselves, joined by "|": ScopedKey("k1", "acme", "alice")
// is "4:acme|5:alice|2:k1". Because every part says its own length, the
// encoding is injective: two different lists of parts (a different number of
// parts, or any part different) never give the same store key, whatever bytes
// the parts hold. An empty scope part is kept ("0:"), so ("", "a") and ("a")
// differ too.
//
// The result is at most MaxStoreKeyLen bytes, valid UTF-8 and without NUL, so
// every idemkit store accepts it. To keep that promise whatever key a client
// sends, the scope parts must be valid UTF-8 without NUL and take at most
// MaxScopeLen bytes with their prefixes (the limit does not depend on the
// key's length, so a client cannot turn a working scope into an error by
// sending a longer key); otherwise ScopedKey returns an error matching
// ErrBadScope. A key that is empty, longer than MaxKeyLen bytes, not UTF-8 or
// holding NUL gives a *KeyError matching ErrMalformedKey.
func ScopedKey(key string, scope ...string) (string, error) {
	if key == "" || !textNoNUL(key) {
		return "", keyErr(ReasonBadChar, "the Idempotency-Key is empty or not valid text")
	}
	if len(key) > MaxKeyLen {
		return "", keyErr(ReasonTooLong, "the Idempotency-Key is "+strconv.Itoa(len(key))+" bytes long; the limit is "+strconv.Itoa(MaxKeyLen))
	}
	n := 0
	for i, p := range scope {
		if !textNoNUL(p) {
			if !utf8.ValidString(p) {
				return "", scopeErr("scope part " + strconv.Itoa(i) + " is not valid UTF-8")
			}
			return "", scopeErr("scope part " + strconv.Itoa(i) + " contains a NUL byte")
		}
		n += decLen(len(p)) + 1 + len(p) + 1
	}
	if n > MaxScopeLen {
		return "", scopeErr("the scope takes " + strconv.Itoa(n) + " bytes with its length prefixes, more than " + strconv.Itoa(MaxScopeLen) + "; keep scope parts short (ids, not names)")
	}
	n += decLen(len(key)) + 1 + len(key)
	// One allocation: the Builder's buffer becomes the string.
	var b strings.Builder
	b.Grow(n)
	var num [20]byte
	for _, p := range scope {
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
		b.WriteByte('|')
	}
	b.Write(strconv.AppendInt(num[:0], int64(len(key)), 10))
	b.WriteByte(':')
	b.WriteString(key)
	return b.String(), nil
}

// SplitScopedKey reverses ScopedKey: it returns the parts of a store key, the
// scope parts first and the client key last. It reports false for a string
// that ScopedKey cannot have produced.
func SplitScopedKey(s string) ([]string, bool) {
	var parts []string
	for {
		colon := strings.IndexByte(s, ':')
		if colon <= 0 || colon > 4 {
			return nil, false
		}
		n, err := strconv.Atoi(s[:colon])
		if err != nil || n < 0 || strconv.Itoa(n) != s[:colon] || colon+1+n > len(s) {
			return nil, false
		}
		parts = append(parts, s[colon+1:colon+1+n])
		s = s[colon+1+n:]
		if s == "" {
			return parts, true
		}
		if s[0] != '|' {
			return nil, false
		}
		s = s[1:]
	}
}

func scopeErr(detail string) error {
	return &scopeError{detail}
}

type scopeError struct{ detail string }

func (e *scopeError) Error() string        { return "keyer: invalid scope: " + e.detail }
func (e *scopeError) Is(target error) bool { return target == ErrBadScope }

// textNoNUL reports whether s is valid UTF-8 without a NUL byte: one pass
// over the bytes for ASCII, the usual case, and utf8.ValidString only from
// the first byte above 0x7f.
func textNoNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0:
			return false
		case c >= utf8.RuneSelf:
			return utf8.ValidString(s[i:]) && strings.IndexByte(s[i:], 0) < 0
		}
	}
	return true
}

func decLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
