package httpidem

import (
	"testing"

	"github.com/idemkit/idemkit/store"
)

func TestNewToken(t *testing.T) {
	seen := map[store.Token]bool{}
	for range 10000 {
		tok := newToken()
		if len(tok) != 26 {
			t.Fatalf("token %q is %d characters", tok, len(tok))
		}
		for _, c := range []byte(tok) {
			if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
				t.Fatalf("token %q has %q", tok, c)
			}
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
	if err := store.CheckRelease("k", newToken()); err != nil {
		t.Fatal(err)
	}
}
