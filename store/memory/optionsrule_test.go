package memory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/memory"

	"github.com/idemkit/idemkit/store"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {

	for name, opts := range map[string][]memory.Option{
		"nil": {nil}, "nil clock": {memory.WithClock(nil)}, "negative sweep": {memory.WithSweepInterval(-time.Second)}, "two bad": {memory.WithClock(nil), memory.WithSweepInterval(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := memory.New(opts...)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("got %v, %v; want an error matching store.ErrInvalid", s, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "memory: ") || strings.Count(msg, "memory: ") != 1 || strings.Count(msg, "invalid argument") != 1 {
				t.Errorf("message %q: want one %q prefix and one %q", msg, "memory: ", "invalid argument")
			}
		})
	}
}
