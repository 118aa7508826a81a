package store

import "crypto/rand"

// Token identifies one claim. Whoever holds the token holds the lease; a
// retry of the same operation after a lost reply reuses its token.
type Token string

// NewToken returns a new random token: 128 or more random bits from
// crypto/rand, encoded as 26 base32 characters. It never fails.
func NewToken() Token {
	return Token(rand.Text())
}
