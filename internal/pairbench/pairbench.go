// Package pairbench runs a store's operations and the raw engine's in one
// benchmark, in alternating phases, for the backends' paired benchmarks.
//
// In each phase every one of the workers runs operations of one side until
// the phase's count is done, then all wait for each other; the phases run
// store, raw, raw, store, … so that a steady drift in the machine's load
// favours neither side, and phases of a few milliseconds put both under the
// same load from the rest of the machine (on a shared machine the load
// drifts more between two benchmark runs than a store costs). The two sides
// never run at the same moment: mixed in one phase, the benchmark would
// measure how the server's CPU is shared between their connections rather
// than their work, and a store that coalesces (fewer, larger statements on
// fewer connections) would get fewer of the server's turns than raw's many.
package pairbench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Side is what one side did: how many operations, in how much wall time.
type Side struct {
	N       int
	Elapsed time.Duration
}

// PerOp returns the side's wall time per operation with its workers
// running at once (its throughput's inverse).
func (s Side) PerOp() time.Duration {
	if s.N == 0 {
		return 0
	}
	return s.Elapsed / time.Duration(s.N)
}

// Run runs n operations in all (b.N, in a benchmark), in phases of phase
// operations of one side each, over exactly workers goroutines. Every
// operation gets its own index i, from 0 to n-1 across both sides. It resets b's timer first and stops
// it when done; the first error fails b (b.Error), and Run returns once the
// phase in which it happened has ended.
func Run(b *testing.B, n, workers, phase int, storeOp, rawOp func(i int) error) (store, raw Side) {
	b.Helper()
	phase = max(phase, 1)
	sides := [2]*Side{&store, &raw}
	ops := [2]func(int) error{storeOp, rawOp}
	b.ResetTimer()
	for done, p := 0, 0; done < n; p++ {
		k := [4]int{0, 1, 1, 0}[p%4]
		m := min(n-done, phase)
		first := done
		var next atomic.Int64
		var wg sync.WaitGroup
		began := time.Now()
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= m {
						return
					}
					if err := ops[k](first + i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		sides[k].Elapsed += time.Since(began)
		sides[k].N += m
		done += m
		if b.Failed() {
			break
		}
	}
	b.StopTimer()
	return store, raw
}
