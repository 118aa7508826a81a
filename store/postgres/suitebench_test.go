package postgres

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended) on
// the preloaded benchmark table:
//
//	go test -run '^$' -bench Suite -cpu 1,16 ./store/postgres/
func BenchmarkSuite(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			return storetest.Subject{Store: benchStore(b)}
		},
	})
}
