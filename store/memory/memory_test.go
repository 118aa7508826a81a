package memory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := newStore(t, memory.WithClock(clock.Now))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

func TestConformanceRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps on the real clock")
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			s := newStore(t)
			return storetest.Subject{Store: s}
		},
		ShortLease: 100 * time.Millisecond,
	})
}

// An invalid option fails at New with an error that matches store.ErrInvalid.
func TestNewRejects(t *testing.T) {
	for name, opt := range map[string]memory.Option{
		"nil clock":      memory.WithClock(nil),
		"negative sweep": memory.WithSweepInterval(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := memory.New(opt)
			if !errors.Is(err, store.ErrInvalid) || s != nil {
				t.Fatalf("New = %v, %v; want nil and an error matching store.ErrInvalid", s, err)
			}
			if !strings.HasPrefix(err.Error(), "memory: new: ") {
				t.Errorf("error %q does not start with the package", err)
			}
		})
	}
}
