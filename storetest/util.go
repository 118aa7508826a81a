package storetest

import (
	"strconv"

	"github.com/idemkit/idemkit/store"
)

func quote(s string) string { return strconv.Quote(s) }
func itoa(n int) string     { return strconv.Itoa(n) }

// tokens returns n fresh, distinct tokens.
func tokens(n int) []store.Token {
	ts := make([]store.Token, n)
	for i := range ts {
		ts[i] = store.NewToken()
	}
	return ts
}
