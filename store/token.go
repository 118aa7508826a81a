package store

import "math/rand/v2"

// Token identifies one claim. Whoever holds the token holds the lease; a
// retry of the same operation after a lost reply reuses its token.
type Token string

// NewToken returns a new random token: 128 random bits encoded as 26
// base32 characters (the alphabet of crypto/rand.Text). It never fails and
// costs no system call.
//
// The bits come from the runtime's ChaCha8 generator (math/rand/v2's
// top-level functions): a cryptographically strong generator that keeps a
// state per thread, keyed from the operating system's entropy when the
// process starts, so tokens are unpredictable to anyone who has not read
// the process's memory. Two tokens — from one process or from any number of
// processes, since each process is keyed independently — are equal only if
// two 128-bit random values collide: for 2^40 tokens in all the chance is
// below 2^-48.
func NewToken() Token {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	hi, lo := rand.Uint64(), rand.Uint64()
	var b [26]byte
	// 26 characters of 5 bits carry 130 bits; the top two are zero.
	for i := 25; i >= 0; i-- {
		b[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return Token(b[:])
}
