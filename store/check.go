package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/ascii"
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
		(ascii.Bad(key)|ascii.Bad(fingerprint)|ascii.Bad(string(token)))&ascii.HiBits == 0 {
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
	if keyTokenLenOK(key, token) && retention > 0 && (ascii.Bad(key)|ascii.Bad(string(token)))&ascii.HiBits == 0 {
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
	if keyTokenLenOK(key, token) && (ascii.Bad(key)|ascii.Bad(string(token)))&ascii.HiBits == 0 {
		return nil
	}
	return checkKeyToken(key, token)
}

// CheckRenew validates the arguments of Store.Renew: the key and the token
// as CheckClaim checks them, and a positive lease. The error wraps
// ErrInvalid.
func CheckRenew(key string, token Token, lease time.Duration) error {
	if keyTokenLenOK(key, token) && lease > 0 && (ascii.Bad(key)|ascii.Bad(string(token)))&ascii.HiBits == 0 {
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
	if len(s) <= max && (len(s) > 0 || emptyOK) && ascii.Plain(s) {
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
