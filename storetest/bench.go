package storetest

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// BenchResponse is the response the benchmarks of RunBenchmarks store and
// replay: a small JSON body, as an API would answer.
var BenchResponse = []byte(`{"id":"pay_1","amount":1990,"currency":"EUR","status":"succeeded"}`)

// benchReplayKeys is how many completed keys the Replay benchmark cycles over.
const benchReplayKeys = 1024

// RunBenchmarks runs the same benchmarks against the stores h.NewBench
// makes, so any backend measures itself the way this module's backends do.
// Each is a sub-benchmark with a stable name, run with b.RunParallel (so
// -cpu sets how many goroutines share the store) and checking every outcome,
// which makes it a race finder under -race too:
//
//   - Cycle: Claim of an absent key, then Complete by the same token: the
//     cost of one first request. Every operation uses a key never used
//     before.
//   - Replay: Claim of a completed key by another token, which reports
//     Completed with the response: the cost of one retried request.
//     The keys (1024 of them) are completed before the timer starts.
//   - Contended: every goroutine claims one key that another token holds,
//     each seeing InProgress: a thundering herd of duplicates.
//
// One op is one Cycle (two store calls) or one Claim. Each benchmark gets a
// fresh store from h.NewBench; b.Fatal is called when h.NewBench is nil.
func RunBenchmarks(b *testing.B, h Harness) {
	b.Helper()
	if h.NewBench == nil {
		b.Fatal("storetest: Harness.NewBench is nil; RunBenchmarks needs it")
	}
	b.Run("Cycle", func(b *testing.B) { benchCycle(b, h) })
	b.Run("Replay", func(b *testing.B) { benchReplay(b, h) })
	b.Run("Contended", func(b *testing.B) { benchContended(b, h) })
}

func benchStore(b *testing.B, h Harness) store.Store {
	b.Helper()
	sub := h.NewBench(b)
	if sub.Store == nil {
		b.Fatal("storetest: Harness.NewBench returned a Subject without a Store")
	}
	return sub.Store
}

// benchRun is unique per benchmark run in this process, so that keys of
// repeated runs (-count, b.N rounds) never meet on a shared table.
var benchRun atomic.Int64

func benchCycle(b *testing.B, h Harness) {
	s := benchStore(b, h)
	ctx := context.Background()
	prefix := "cycle-" + strconv.FormatInt(benchRun.Add(1), 10) + "-" + string(store.NewToken())[:8] + "-"
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := prefix + strconv.FormatInt(worker.Add(1), 10) + "-"
		tok := store.NewToken()
		for i := 0; pb.Next(); i++ {
			k := p + strconv.Itoa(i)
			c, err := s.Claim(ctx, k, "fp", tok, time.Minute)
			if err != nil {
				b.Fatalf("Cycle: Claim(%q): %v", k, err)
			}
			if c.Outcome != store.Acquired {
				b.Fatalf("Cycle: Claim(%q) of an absent key: %v, want acquired", k, c.Outcome)
			}
			if err := s.Complete(ctx, k, tok, BenchResponse, time.Hour); err != nil {
				b.Fatalf("Cycle: Complete(%q): %v", k, err)
			}
		}
	})
}

func benchReplay(b *testing.B, h Harness) {
	s := benchStore(b, h)
	ctx := context.Background()
	prefix := "replay-" + strconv.FormatInt(benchRun.Add(1), 10) + "-" + string(store.NewToken())[:8] + "-"
	keys := make([]string, benchReplayKeys)
	tok := store.NewToken()
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if _, err := s.Claim(ctx, keys[i], "fp", tok, time.Hour); err != nil {
			b.Fatalf("Replay: setup Claim: %v", err)
		}
		if err := s.Complete(ctx, keys[i], tok, BenchResponse, time.Hour); err != nil {
			b.Fatalf("Replay: setup Complete: %v", err)
		}
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		other := store.NewToken()
		i := int(worker.Add(1)) * 97
		for pb.Next() {
			i++
			k := keys[i%benchReplayKeys]
			c, err := s.Claim(ctx, k, "fp", other, time.Minute)
			if err != nil {
				b.Fatalf("Replay: Claim(%q): %v", k, err)
			}
			if c.Outcome != store.Completed || !bytes.Equal(c.Record.Response, BenchResponse) {
				b.Fatalf("Replay: Claim(%q) of a completed key: %v %s, want completed with the response", k, c.Outcome, describe(c.Record))
			}
		}
	})
}

func benchContended(b *testing.B, h Harness) {
	s := benchStore(b, h)
	ctx := context.Background()
	hot := "hot-" + strconv.FormatInt(benchRun.Add(1), 10) + "-" + string(store.NewToken())[:8]
	holder := store.NewToken()
	if c, err := s.Claim(ctx, hot, "fp", holder, time.Hour); err != nil || c.Outcome != store.Acquired {
		b.Fatalf("Contended: setup Claim = %v, %v; want acquired", c.Outcome, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		tok := store.NewToken()
		for pb.Next() {
			c, err := s.Claim(ctx, hot, "fp", tok, time.Minute)
			if err != nil {
				b.Fatalf("Contended: Claim: %v", err)
			}
			if c.Outcome != store.InProgress || c.Record.Token != holder {
				b.Fatalf("Contended: Claim of a held key: %v %s, want in progress held by %s", c.Outcome, describe(c.Record), holder)
			}
		}
	})
}
