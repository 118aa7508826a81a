package storetest_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/storetest"
)

// BenchmarkMapStore runs RunBenchmarks on the suite's own correct map
// store, so the benchmarks themselves are exercised (and race-checked with
// -race) without a backend:
//
//	go test -run '^$' -bench MapStore -cpu 1,4 ./storetest/
func BenchmarkMapStore(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewBench: func(b *testing.B) storetest.Subject {
			return storetest.Subject{Store: newMapStore("correct", time.Now)}
		},
	})
}
