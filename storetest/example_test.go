package storetest_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// A backend proves itself by calling Run from its own test. This is how
// store/memory does it; a third-party backend does the same with its own
// constructor. With a Clock the time-dependent cases run instantly; a backend
// on a server's clock leaves Clock nil and the suite sleeps for about
// Harness.ShortLease instead.
func Example_wiringABackend() {
	testConformance := func(t *testing.T) { // func TestConformance(t *testing.T) in your _test.go file
		storetest.Run(t, storetest.Harness{
			New: func(t *testing.T) storetest.Subject {
				clock := storetest.NewManualClock(time.Now())
				s, err := memory.New(memory.WithClock(clock.Now))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return storetest.Subject{Store: s, Clock: clock}
			},
		})
	}
	_ = testConformance
}

// RunBenchmarks measures any backend with the benchmarks this module's
// backends run (Cycle, Replay, Contended). Call it from a Benchmark function
// with a NewBench that returns the store to measure.
func ExampleRunBenchmarks() {
	benchmarkStore := func(b *testing.B) { // func BenchmarkStore(b *testing.B) in your _test.go file
		storetest.RunBenchmarks(b, storetest.Harness{
			NewBench: func(b *testing.B) storetest.Subject {
				s, err := memory.New()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return storetest.Subject{Store: s}
			},
		})
	}
	_ = benchmarkStore
}
