package memory_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// BenchmarkPaired measures the Store against rawShards, a bare sharded map
// doing the same work with the same copies (the response copied in on
// Complete and out on every Claim that returns it), in one run: rounds of
// pairedRound operations per worker, the Store's round and raw's round one
// after the other (the order swapping every round), so both meet the same
// load. It reports store/raw, the Store's throughput relative to raw's.
// Each operation on both sides starts with store.NewToken, as every claim
// does (httpidem, dedup): a claim needs an owner whatever stores it.
// cmd/idembench runs it:
//
//	go test -run '^$' -bench Paired -benchtime 200000x -count 5 ./store/memory/
func BenchmarkPaired(b *testing.B) {
	resp := []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR"}`)
	ctx := context.Background()
	type bcase struct {
		name string
		// setup returns per-worker operations for the Store and for raw.
		setup func(s *memory.Store, r *rawShards) (storeOp, rawOp func(w, i int) error)
	}
	cases := []bcase{
		{"ClaimComplete", func(s *memory.Store, r *rawShards) (func(int, int) error, func(int, int) error) {
			// A ring of 64Ki keys per side, each worker in its own part,
			// completed with a 1ns retention so every key is absent again
			// when the ring comes back to it.
			ks := keys(1 << 16)
			return func(w, i int) error {
					k := ks[(w<<12+i)&(1<<16-1)]
					tok := store.NewToken()
					c, err := s.Claim(ctx, k, "fp", tok, time.Minute)
					if err != nil {
						return err
					}
					if c.Outcome != store.Acquired {
						return nil // a ring slot another worker holds
					}
					return s.Complete(ctx, k, tok, resp, time.Nanosecond)
				}, func(w, i int) error {
					k := ks[(w<<12+i)&(1<<16-1)]
					tok := string(store.NewToken())
					if _, ok := r.claim(k, "fp", tok, time.Minute); !ok {
						return nil
					}
					r.complete(k, tok, resp, time.Nanosecond)
					return nil
				}
		}},
		{"Replay", func(s *memory.Store, r *rawShards) (func(int, int) error, func(int, int) error) {
			ks := keys(1024)
			tok := store.NewToken()
			for _, k := range ks {
				if _, err := s.Claim(ctx, k, "fp", tok, time.Minute); err != nil {
					return nil, nil
				}
				if err := s.Complete(ctx, k, tok, resp, time.Hour); err != nil {
					return nil, nil
				}
				r.claim(k, "fp", string(tok), time.Minute)
				r.complete(k, string(tok), resp, time.Hour)
			}
			return func(w, i int) error {
					c, err := s.Claim(ctx, ks[(w<<8+i)&1023], "fp", store.NewToken(), time.Minute)
					if err != nil {
						return err
					}
					if c.Outcome != store.Completed || len(c.Record.Response) != len(resp) {
						return fmt.Errorf("replay: %v", c.Outcome)
					}
					return nil
				}, func(w, i int) error {
					e, ok := r.claim(ks[(w<<8+i)&1023], "fp", string(store.NewToken()), time.Minute)
					if ok || len(e.response) != len(resp) {
						return fmt.Errorf("raw replay: acquired %v", ok)
					}
					return nil
				}
		}},
		{"Contended", func(s *memory.Store, r *rawShards) (func(int, int) error, func(int, int) error) {
			// Every worker claims one key held by another token.
			if _, err := s.Claim(ctx, "hot", "fp", store.NewToken(), time.Hour); err != nil {
				return nil, nil
			}
			r.claim("hot", "fp", "holder", time.Hour)
			return func(w, i int) error {
					c, err := s.Claim(ctx, "hot", "fp", store.NewToken(), time.Minute)
					if err == nil && c.Outcome != store.InProgress {
						err = fmt.Errorf("contended: %v", c.Outcome)
					}
					return err
				}, func(w, i int) error {
					if _, ok := r.claim("hot", "fp", string(store.NewToken()), time.Minute); ok {
						return fmt.Errorf("raw contended: acquired")
					}
					return nil
				}
		}},
	}
	for _, bc := range cases {
		for _, workers := range []int{1, 16} {
			b.Run(bc.name+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				s := newStore(b, memory.WithSweepInterval(0))
				b.Cleanup(func() { s.Close() })
				storeOp, rawOp := bc.setup(s, newRawShards())
				if storeOp == nil {
					b.Fatal("setup failed")
				}
				runPaired(b, workers, storeOp, rawOp)
			})
		}
	}
}

const pairedRound = 2000 // operations per worker per round

// runPaired runs b.N operations of each side split over workers
// goroutines, in rounds that alternate the two sides, and reports
// store/raw = raw's total wall time ÷ the Store's.
func runPaired(b *testing.B, workers int, storeOp, rawOp func(w, i int) error) {
	b.Helper()
	var storeTime, rawTime time.Duration
	perRound := pairedRound * workers
	phase := func(op func(w, i int) error, base, n int) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make([]error, workers)
		start := time.Now()
		for w := range workers {
			wg.Go(func() {
				for i := base; i < base+n; i++ {
					if err := op(w, i); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		d := time.Since(start)
		for _, err := range errs {
			if err != nil {
				return d, err
			}
		}
		return d, nil
	}
	b.ReportAllocs()
	b.ResetTimer()
	for r, done := 0, 0; done < b.N; r, done = r+1, done+perRound {
		n := min(perRound, b.N-done) / workers
		if n == 0 {
			n = 1
		}
		base := r * pairedRound
		first, second := storeOp, rawOp
		if r%2 == 1 {
			first, second = rawOp, storeOp
		}
		d1, err := phase(first, base, n)
		if err != nil {
			b.Fatal(err)
		}
		d2, err := phase(second, base, n)
		if err != nil {
			b.Fatal(err)
		}
		if r%2 == 1 {
			d1, d2 = d2, d1
		}
		storeTime += d1
		rawTime += d2
	}
	b.StopTimer()
	b.ReportMetric(float64(storeTime.Nanoseconds())/float64(b.N), "store-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(rawTime.Seconds()/storeTime.Seconds(), "store/raw")
}

// rawShards is the floor the Store is measured against: 256 maps behind a
// mutex each, the Store's hash to pick one, the same record fields, the response
// copied in on complete and out (after the unlock) on every claim, and
// expiry by the real clock, read once per operation before the lock as the
// Store reads it. It makes the decisions the contract asks of any store and
// no more: a claim renews its own token's lease and tells a live record of
// another fingerprint from one it would replay (the caller reads which from
// the returned fields), and a complete keeps the first response. No
// validation, no errors, no time.Time values.
type rawShards struct {
	shards [256]struct {
		mu sync.Mutex
		m  map[string]rawEntry
		_  [48]byte // a cache line each, as the Store's
	}
}

type rawEntry struct {
	fingerprint, token string
	completed          bool
	response           []byte
	expiresAt          int64
}

func newRawShards() *rawShards {
	r := &rawShards{}
	for i := range r.shards {
		r.shards[i].m = make(map[string]rawEntry)
	}
	return r
}

// shard picks the key's shard with the Store's hash (memory's scan without
// its validation): eight bytes at a time, multiplied, the top byte.
func (r *rawShards) shard(key string) int {
	const k = 0x9e3779b97f4a7c15
	n := len(key)
	var w uint64
	switch {
	case n >= 8:
		h := (le64(key[n-8:]) ^ uint64(n)) * k
		for s := key; len(s) > 8; s = s[8:] {
			h = (h ^ le64(s[:8])) * k
		}
		return int(h >> 56)
	case n >= 4:
		w = le32(key[:4]) | le32(key[n-4:])<<32
	case n >= 2:
		w = le16(key[:2]) | le16(key[n-2:])<<16 | 0x0101010100000000
	case n == 1:
		w = uint64(key[0]) | 0x0101010101010100
	}
	return int((w ^ uint64(n)) * k >> 56)
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

func le16(s string) uint64 {
	_ = s[1]
	return uint64(s[0]) | uint64(s[1])<<8
}

// claim takes key for token if it is absent (or expired), or renews the
// lease when token holds it for the same fingerprint, and reports true;
// otherwise it returns a copy of the live record.
func (r *rawShards) claim(key, fp, token string, lease time.Duration) (rawEntry, bool) {
	now := time.Now().UnixNano()
	sh := &r.shards[r.shard(key)]
	sh.mu.Lock()
	e, ok := sh.m[key]
	if !ok || e.expiresAt <= now || !e.completed && e.token == token && e.fingerprint == fp {
		e = rawEntry{fingerprint: fp, token: token, expiresAt: rawAdd(now, lease)}
		sh.m[key] = e
		sh.mu.Unlock()
		return e, true
	}
	sh.mu.Unlock()
	e.response = bytes.Clone(e.response)
	return e, false
}

// complete stores resp for token's claim and reports true; a second
// complete by the same token keeps the first response.
func (r *rawShards) complete(key, token string, resp []byte, retention time.Duration) bool {
	resp = bytes.Clone(resp)
	now := time.Now().UnixNano()
	sh := &r.shards[r.shard(key)]
	sh.mu.Lock()
	e, ok := sh.m[key]
	if !ok || e.expiresAt <= now || e.token != token {
		sh.mu.Unlock()
		return false
	}
	if !e.completed {
		e.completed, e.response, e.expiresAt = true, resp, rawAdd(now, retention)
		sh.m[key] = e
	}
	sh.mu.Unlock()
	return true
}

// rawAdd is now+d, saturating rather than wrapping to the past for a huge d
// (the contract's deadlines never overflow).
func rawAdd(now int64, d time.Duration) int64 {
	if now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}
