package redis

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkSuite runs storetest's benchmarks (Cycle, Replay, Contended)
// against the real Redis at IDEMKIT_REDIS_ADDR, under a prefix deleted at
// the end:
//
//	go test -run '^$' -bench Suite -cpu 1,32 ./store/redis/
func BenchmarkSuite(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			c, prefix := benchClient(b)
			return storetest.Subject{Store: mustNew(b, c, WithPrefix(prefix))}
		},
	})
}
