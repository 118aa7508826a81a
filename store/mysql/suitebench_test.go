package mysql

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended) on
// the preloaded benchmark table:
//
//	go test -run '^$' -bench Suite -cpu 1,16 ./store/mysql/
func BenchmarkSuite(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			s, _ := benchStore(b)
			return storetest.Subject{Store: s}
		},
	})
}
