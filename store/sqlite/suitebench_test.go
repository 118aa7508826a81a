package sqlite

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended) on
// the preloaded benchmark file, through Open's defaults:
//
//	go test -run '^$' -bench Suite -cpu 1,8 ./store/sqlite/
func BenchmarkSuite(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			s, err := Open(benchFile(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return storetest.Subject{Store: s}
		},
	})
}
