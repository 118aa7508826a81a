package memory

import (
	"time"

	"github.com/idemkit/idemkit/internal/ascii"
	"github.com/idemkit/idemkit/store"
)

// The checks below answer, in one pass over the arguments, whether they are
// certainly valid by the rules of store.CheckClaim, CheckComplete,
// CheckRelease and CheckKey: the lengths those allow, and every byte plain
// ASCII (neither NUL nor 0x80 or above), which makes a string valid UTF-8
// without NUL. They accept a subset of what the store package accepts and
// never more; an argument they do not accept (empty, too long, non-ASCII,
// a bad duration) goes to the store package's check, which stays the one
// authority: it accepts valid UTF-8 beyond ASCII and words every error.
// The Store calls them instead of the store package's checks on the hot
// path because those cost more than the rest of a replay (their loop checks
// the bounds of every byte it reads).

// claimOK returns the key's hash (see scan) and whether store.CheckClaim
// certainly accepts these arguments.
func claimOK(key, fingerprint string, token store.Token, lease time.Duration) (uint64, bool) {
	h, bad := scan(key)
	bad |= ascii.Bad(fingerprint) | ascii.Bad(string(token))
	return h, lease > 0 && keyTokenOK(key, token) && len(fingerprint) <= store.MaxFingerprintLen &&
		bad&ascii.HiBits == 0
}

// completeOK returns the key's hash and whether store.CheckComplete
// certainly accepts these arguments.
func completeOK(key string, token store.Token, retention time.Duration) (uint64, bool) {
	h, ok := releaseOK(key, token)
	return h, ok && retention > 0
}

// releaseOK returns the key's hash and whether store.CheckRelease
// certainly accepts these arguments.
func releaseOK(key string, token store.Token) (uint64, bool) {
	h, bad := scan(key)
	return h, keyTokenOK(key, token) && (bad|ascii.Bad(string(token)))&ascii.HiBits == 0
}

// keyOK returns the key's hash and whether store.CheckKey certainly accepts it.
func keyOK(key string) (uint64, bool) {
	h, bad := scan(key)
	return h, uint(len(key))-1 < store.MaxKeyLen && bad&ascii.HiBits == 0
}

// keyTokenOK checks the lengths of a key and a token: neither empty, neither
// longer than the store package allows.
func keyTokenOK(key string, token store.Token) bool {
	// uint(n)-1 < max is 0 < n <= max in one comparison.
	return uint(len(key))-1 < store.MaxKeyLen && uint(len(token))-1 < store.MaxTokenLen
}

const mulK = 0x9e3779b97f4a7c15 // odd, 2^64 divided by the golden ratio

// scan reads s eight bytes at a time and returns a hash of it and a word
// in which some bit of ascii.HiBits is set if and only if s holds a NUL byte or a
// byte of 0x80 or above. A string shorter than eight bytes is read as two
// overlapping halves, and the last word of a longer one overlaps the word
// before it, so every byte is read and no loop runs byte by byte.
//
// The hash picks the key's shard (its top byte, which every bit of the
// input reaches through the multiplications). It is unseeded, as FNV was:
// keys chosen to share a shard only make their callers share a mutex,
// since each shard's map hashes with its own seed.
func scan(s string) (h, bad uint64) {
	n := len(s)
	var w uint64
	switch {
	case n >= 8:
		w = ascii.Load8(s[n-8:])
		h = (w ^ uint64(n)) * mulK
		top, nonzero := w, w+ascii.Lo7Bits
		for ; len(s) > 8; s = s[8:] {
			w = ascii.Load8(s[:8])
			h = (h ^ w) * mulK
			top |= w
			nonzero &= w + ascii.Lo7Bits
		}
		return h, top | ^nonzero
	case n >= 4:
		w = ascii.Load4(s[:4]) | ascii.Load4(s[n-4:])<<32
	case n >= 2:
		// The top four bytes are padding that is neither NUL nor high.
		w = ascii.Load2(s[:2]) | ascii.Load2(s[n-2:])<<16 | ascii.LoBits&^0xffffffff
	case n == 1:
		w = uint64(s[0]) | ascii.LoBits&^0xff
	default:
		return 0, 0
	}
	return (w ^ uint64(n)) * mulK, bad8(w)
}

// bad8 sets the top bit of some byte of the word when one of its bytes is
// 0x80 or above (that byte's own top bit) or zero: a byte below 0x80 plus
// 0x7f carries into no other byte and sets its own top bit unless it is
// zero, so ^(v+0x7f..) has a top bit set only over a zero byte, while every
// byte is below 0x80. scan's loop applies it to all its
// words at once: the words ORed together (top), and the words plus 0x7f..
// ANDed together (nonzero).
func bad8(v uint64) uint64 { return v | ^(v + ascii.Lo7Bits) }
