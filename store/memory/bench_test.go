package memory_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// Run with: go test -run '^$' -bench . -benchmem -cpu 1,2 ./store/memory/
//
// BenchmarkRawMap is the floor: one map behind one mutex doing the same
// insert and update with no contract around it.

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "key-" + strconv.Itoa(i)
	}
	return ks
}

// BenchmarkClaimComplete claims and completes keys that are absent: a ring of
// 64Ki keys completed with a 1ns retention, so each key is expired (absent)
// again when the ring comes back to it and the map stays the same size, as in
// a long-running process whose sweep keeps up.
func BenchmarkClaimComplete(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, memory.WithSweepInterval(0))
	ks := keys(1 << 16)
	resp := []byte(`{"id":1,"amount":1990}`)
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine walks its own part of the ring, so the benchmark
		// shares no counter between cores; only the store is shared.
		i := workers.Add(1) << 12
		tok := store.NewToken() // one per goroutine: a shared token would make two claims one
		for pb.Next() {
			i++
			k := ks[i&(1<<16-1)]
			c, err := s.Claim(ctx, k, "fp", tok, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if c.Outcome != store.Acquired {
				continue // another goroutine holds this ring slot right now
			}
			if err := s.Complete(ctx, k, tok, resp, time.Nanosecond); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, memory.WithSweepInterval(0))
	ks := keys(1024)
	tok := store.NewToken()
	for _, k := range ks {
		if _, err := s.Claim(ctx, k, "fp", tok, time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, k, tok, []byte(`{"id":1,"amount":1990}`), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		other := store.NewToken()
		i := workers.Add(1) << 8
		for pb.Next() {
			i++
			c, err := s.Claim(ctx, ks[i&1023], "fp", other, time.Minute)
			if err != nil || c.Outcome != store.Completed {
				b.Fatal(c.Outcome, err)
			}
		}
	})
}

// BenchmarkContendedClaim: every goroutine claims the same key, held by
// another token, as a thundering herd of duplicates would.
func BenchmarkContendedClaim(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, memory.WithSweepInterval(0))
	if _, err := s.Claim(ctx, "hot", "fp", store.NewToken(), time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		tok := store.NewToken()
		for pb.Next() {
			c, err := s.Claim(ctx, "hot", "fp", tok, time.Minute)
			if err != nil || c.Outcome != store.InProgress {
				b.Fatal(c.Outcome, err)
			}
		}
	})
}

func BenchmarkRawMap(b *testing.B) {
	type rec struct {
		token    string
		response []byte
		until    int64
	}
	var mu sync.Mutex
	m := map[string]rec{}
	ks := keys(1 << 16)
	resp := []byte(`{"id":1,"amount":1990}`)
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := workers.Add(1) << 12
		for pb.Next() {
			i++
			k := ks[i&(1<<16-1)]
			mu.Lock()
			if r, ok := m[k]; !ok || r.until <= time.Now().UnixNano() {
				m[k] = rec{token: "t", until: time.Now().UnixNano() + int64(time.Minute)}
			}
			mu.Unlock()
			mu.Lock()
			r := m[k]
			r.response = append([]byte(nil), resp...)
			r.until = time.Now().UnixNano() + 1
			m[k] = r
			mu.Unlock()
		}
	})
}
