package memory_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store/memory"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {
	for name, opts := range map[string][]memory.Option{
		"nil": {nil}, "nil clock": {memory.WithClock(nil)}, "negative sweep": {memory.WithSweepInterval(-time.Second)}, "two bad": {memory.WithClock(nil), memory.WithSweepInterval(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := memory.New(opts...)
			secrettest.CheckInvalid(t, "memory", err)
		})
	}
}
