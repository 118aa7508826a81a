package memory_test

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended), the
// ones any backend can run, on the real clock:
//
//	go test -run '^$' -bench Suite -cpu 1,2 ./store/memory/
func BenchmarkSuite(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			return storetest.Subject{Store: newStore(b)}
		},
	})
}
