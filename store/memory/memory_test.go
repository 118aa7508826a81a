package memory_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := memory.New(memory.WithClock(clock.Now))
			t.Cleanup(func() { s.Close() })
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
			s := memory.New()
			t.Cleanup(func() { s.Close() })
			return storetest.Subject{Store: s}
		},
		ShortLease: 100 * time.Millisecond,
	})
}
