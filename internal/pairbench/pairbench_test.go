package pairbench

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunPhases checks, from inside a benchmark, that Run gives every index
// once, alternates the sides store, raw, raw, store in phases, and never
// runs the two at the same moment.
func TestRunPhases(t *testing.T) {
	var seen [100]atomic.Int32
	var side [100]atomic.Int32
	var running [2]atomic.Int32
	var overlap atomic.Bool
	op := func(k int) func(int) error {
		return func(i int) error {
			running[k].Add(1)
			defer running[k].Add(-1)
			if running[1-k].Load() > 0 {
				overlap.Store(true)
			}
			seen[i].Add(1)
			side[i].Store(int32(k))
			time.Sleep(10 * time.Microsecond)
			return nil
		}
	}
	var store, raw Side
	testing.Benchmark(func(b *testing.B) {
		if b.N != 1 {
			return // run once, whatever N testing picks next
		}
		store, raw = Run(b, len(seen), 4, 10, op(0), op(1))
	})
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times, want once", i, n)
		}
		// Phases of ten indexes, sides store, raw, raw, store, …
		if want := [4]int32{0, 1, 1, 0}[(i/10)%4]; side[i].Load() != want {
			t.Errorf("index %d ran on side %d, want %d (phases store, raw, raw, store)", i, side[i].Load(), want)
		}
	}
	if overlap.Load() {
		t.Error("the store's and raw's operations ran at the same moment")
	}
	if store.N != 50 || raw.N != 50 {
		t.Errorf("sides ran %d and %d operations, want 50 each", store.N, raw.N)
	}
	if store.Elapsed <= 0 || raw.Elapsed <= 0 || store.PerOp() <= 0 {
		t.Errorf("elapsed store %v raw %v: want both timed", store.Elapsed, raw.Elapsed)
	}
}

func TestRunStopsAtAnError(t *testing.T) {
	var calls atomic.Int32
	failed := false
	testing.Benchmark(func(b *testing.B) {
		if b.N != 1 {
			return
		}
		Run(b, 1000, 2, 10, func(int) error {
			calls.Add(1)
			return errors.New("broken")
		}, func(int) error { return nil })
		failed = b.Failed()
	})
	if !failed {
		t.Error("an operation's error did not fail the benchmark")
	}
	if n := calls.Load(); n > 2 {
		t.Errorf("%d store operations after the first error, want at most one per worker", n)
	}
}
