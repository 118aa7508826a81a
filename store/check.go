package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits every backend accepts. Keys, fingerprints and tokens must also be
// valid UTF-8 without NUL bytes, so that every backend can store them as text.
//
// MaxKeyLen is the limit of a store key: what a Store is given, the
// client's key once the server has scoped it (keyer.ScopedKey: tenant,
// user, route and the client's key, each with its length). It is not the
// limit of a client's Idempotency-Key, keyer.MaxKeyLen (255 visible ASCII
// characters), which idemclient and httpidem apply; keyer.MaxStoreKeyLen
// equals this one.
const (
	MaxKeyLen         = 1024 // bytes, of a store (scoped) key
	MaxFingerprintLen = 1024 // bytes
	MaxTokenLen       = 128  // bytes
)

// CheckClaim validates the arguments of Store.Claim: the key as CheckKey
// checks it, a fingerprint of at most MaxFingerprintLen bytes (it may be
// empty), a non-empty token of at most MaxTokenLen bytes, both valid UTF-8
// without NUL, and a positive lease. Backends call it before touching
// storage; the error wraps ErrInvalid.
func CheckClaim(key, fingerprint string, token Token, lease time.Duration) error {
	if keyTokenLenOK(key, token) && len(fingerprint) <= MaxFingerprintLen && lease > 0 &&
		(badBytes(key)|badBytes(fingerprint)|badBytes(string(token)))&hiBits == 0 {
		return nil // the common case: lengths, then every byte, in one pass
	}
	if err := checkKeyToken(key, token); err != nil {
		return err
	}
	if err := checkText("fingerprint", fingerprint, MaxFingerprintLen, true); err != nil {
		return err
	}
	return checkDuration("lease", lease)
}

// CheckComplete validates the arguments of Store.Complete: the key and the
// token as CheckClaim checks them, and a positive retention. The error
// wraps ErrInvalid.
func CheckComplete(key string, token Token, retention time.Duration) error {
	if keyTokenLenOK(key, token) && retention > 0 && (badBytes(key)|badBytes(string(token)))&hiBits == 0 {
		return nil
	}
	if err := checkKeyToken(key, token); err != nil {
		return err
	}
	return checkDuration("retention", retention)
}

// CheckRelease validates the arguments of Store.Release: the key and the
// token as CheckClaim checks them. The error wraps ErrInvalid.
func CheckRelease(key string, token Token) error {
	if keyTokenLenOK(key, token) && (badBytes(key)|badBytes(string(token)))&hiBits == 0 {
		return nil
	}
	return checkKeyToken(key, token)
}

// CheckRenew validates the arguments of Store.Renew: the key and the token
// as CheckClaim checks them, and a positive lease. The error wraps
// ErrInvalid.
func CheckRenew(key string, token Token, lease time.Duration) error {
	if keyTokenLenOK(key, token) && lease > 0 && (badBytes(key)|badBytes(string(token)))&hiBits == 0 {
		return nil
	}
	if err := checkKeyToken(key, token); err != nil {
		return err
	}
	return checkDuration("lease", lease)
}

// CheckKey validates a key, as for Store.Get: not empty, at most MaxKeyLen
// bytes, valid UTF-8 without NUL. The error wraps ErrInvalid.
func CheckKey(key string) error {
	return checkText("key", key, MaxKeyLen, false)
}

// keyTokenLenOK reports whether a key and a token have lengths the checks
// accept: neither empty, neither longer than its limit (uint(n)-1 < max is
// 0 < n <= max in one comparison).
func keyTokenLenOK(key string, token Token) bool {
	return uint(len(key))-1 < MaxKeyLen && uint(len(token))-1 < MaxTokenLen
}

func checkKeyToken(key string, token Token) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return checkText("token", string(token), MaxTokenLen, false)
}

func checkText(what, s string, max int, emptyOK bool) error {
	if len(s) <= max && (len(s) > 0 || emptyOK) && plainASCII(s) {
		return nil // the common case, in one pass
	}
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

func checkDuration(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: %s %v is not positive", ErrInvalid, what, d)
	}
	return nil
}

// The Check functions start with a fast path for the arguments nearly every
// call has: lengths within their limits and plain ASCII text, which is valid
// UTF-8 without NUL. It accepts a subset of what the full checks accept and
// never more (FuzzCheckFastPath); anything else (an empty or long string, a
// byte of 0x80 or above, a NUL, a bad duration) goes the full way, which
// accepts valid UTF-8 beyond ASCII and words every error.

const (
	loBits = 0x0101010101010101
	hiBits = 0x8080808080808080
)

// plainASCII reports whether s is ASCII without NUL bytes, which makes it
// valid UTF-8 without NUL.
func plainASCII(s string) bool { return badBytes(s)&hiBits == 0 }

// badBytes returns a word in which some bit of hiBits is set if and only
// if s holds a NUL byte or a byte of 0x80 or above. It reads s eight bytes
// at a time with no test inside its loop: the words' top bits are ORed
// together (a byte of 0x80 or above sets its own), and the words plus
// 0x7f in every byte ANDed together (a byte below 0x80 plus 0x7f carries
// into no other byte and sets its top bit unless the byte is zero), so
// the caller tests the result once, for all its strings at once. The last
// word of a string of eight bytes or more overlaps the one before it, and
// a shorter string is read as two overlapping halves, so no loop runs
// byte by byte.
func badBytes(s string) uint64 {
	const k = 0x7f7f7f7f7f7f7f7f
	n := len(s)
	var w uint64
	switch {
	case n >= 8:
		w = load8(s[n-8:])
		top, nonzero := w, w+k
		for ; len(s) > 8; s = s[8:] {
			w = load8(s)
			top |= w
			nonzero &= w + k
		}
		return top | ^nonzero
	case n >= 4:
		w = load4(s) | load4(s[n-4:])<<32
	case n >= 2:
		// The top four bytes are padding that is neither NUL nor high.
		w = load2(s) | load2(s[n-2:])<<16 | loBits&^0xffffffff
	case n == 1:
		w = uint64(s[0]) | loBits&^0xff
	default:
		return 0
	}
	return w | ^(w + k)
}

// load8, load4 and load2 read the first bytes of s as a little-endian word
// (one load each: one bounds check, the bytes combined by the compiler).
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load4(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

func load2(s string) uint64 {
	_ = s[1]
	return uint64(s[0]) | uint64(s[1])<<8
}
