package secrettest

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
)

// CheckInvalid fails t unless err matches store.ErrInvalid and reads as the
// options rule says: pkg's prefix ("memory: ") once, and "invalid argument"
// once. (It lives here beside the other checks of what an opener's error
// says.)
func CheckInvalid(t testing.TB, pkg string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("%v: want an error matching store.ErrInvalid", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, pkg+": ") || strings.Count(msg, pkg+": ") != 1 || strings.Count(msg, "invalid argument") != 1 {
		t.Errorf("message %q: want one %q prefix and one %q", msg, pkg+": ", "invalid argument")
	}
}
