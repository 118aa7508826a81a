package memory_test

import (
	"testing"

	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended), the
// ones any backend can run, on the real clock:
//
//	go test -run '^$' -bench Suite -cpu 1,2 ./store/memory/
func BenchmarkSuite(b *testing.B) {
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
