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
	if err := checkKeyToken(key, token); err != nil {
		return err
	}
	return checkDuration("retention", retention)
}

// CheckRelease validates the arguments of Store.Release: the key and the
// token as CheckClaim checks them. The error wraps ErrInvalid.
func CheckRelease(key string, token Token) error {
	return checkKeyToken(key, token)
}

// CheckRenew validates the arguments of Store.Renew: the key and the token
// as CheckClaim checks them, and a positive lease. The error wraps
// ErrInvalid.
func CheckRenew(key string, token Token, lease time.Duration) error {
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

// plainASCII reports whether s is ASCII without NUL bytes, which makes it
// valid UTF-8 without NUL, in one pass, eight bytes at a time.
func plainASCII(s string) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // one bounds check for the word, not one per byte
		v := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// A byte >= 0x80 sets its top bit; a zero byte makes (v-lo)&^v set it.
		if (v|(v-lo)&^v)&hi != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}
