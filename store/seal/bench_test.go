package seal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/store"
)

// benchBackends are the stores the paired benchmarks seal.
var benchBackends = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"memory", func(b *testing.B) store.Store { return newMemory(b, time.Now) }},
	{"redis", func(b *testing.B) store.Store { return newRedis(b, realRedis(b)) }},
	{"postgres", func(b *testing.B) store.Store { return newPostgres(b, testPool(b)) }},
}

// BenchmarkPaired measures the sealed store against the same store
// unsealed, at 16 workers, in alternating phases (internal/pairbench) so
// both meet the same load: Cycle (Claim of a new key, then Complete) and
// Replay (Claim of a completed key), with responses of 1 KiB and 64 KiB.
// It reports sealed-ops/s, unsealed-ops/s and sealed/raw, their ratio (raw
// is the store unsealed; 0.9 means sealed is 10 % slower).
//
//	go test -run '^$' -bench '^BenchmarkPaired$' -benchtime 4000x ./store/seal/
func BenchmarkPaired(b *testing.B) {
	for _, be := range benchBackends {
		for _, size := range []int{1 << 10, 64 << 10} {
			resp := make([]byte, size)
			_, _ = rand.Read(resp)
			for _, bc := range []struct {
				name string
				op   func(b *testing.B, s store.Store) func(i int) error
			}{
				{"Cycle", func(b *testing.B, s store.Store) func(int) error { return cycleOp(s, resp) }},
				{"Replay", func(b *testing.B, s store.Store) func(int) error { return replayOp(b, s, resp) }},
			} {
				b.Run(fmt.Sprintf("%s/%s/%dKiB/workers=16", bc.name, be.name, size>>10), func(b *testing.B) {
					inner := be.open(b)
					sealed := mustSeal(b, inner, testKeys(b))
					st, raw := pairbench.Run(b, b.N, 16, 256, bc.op(b, sealed), bc.op(b, inner))
					if st.N == 0 || raw.N == 0 {
						return
					}
					sr, rr := float64(st.N)/st.Elapsed.Seconds(), float64(raw.N)/raw.Elapsed.Seconds()
					b.ReportMetric(sr, "sealed-ops/s")
					b.ReportMetric(rr, "unsealed-ops/s")
					b.ReportMetric(sr/rr, "sealed/raw")
				})
			}
		}
	}
}

// benchFP is a fingerprint of the form keyer makes ("v1:" and the hex
// SHA-256 of the request), so that the unsealed store stores what it would
// in use, and the sealed one what sealing makes of that.
var benchFP = "v1:" + strings.Repeat("9f86d081884c7d65", 4)

// cycleOp claims a key never used before and completes it with resp.
func cycleOp(s store.Store, resp []byte) func(i int) error {
	prefix := "cycle-" + string(store.NewToken())[:10] + "-"
	return func(i int) error {
		k, tok := prefix+strconv.Itoa(i), store.NewToken()
		c, err := s.Claim(context.Background(), k, benchFP, tok, time.Minute)
		if err != nil {
			return err
		}
		if c.Outcome != store.Acquired {
			return fmt.Errorf("claim of a new key: %v", c.Outcome)
		}
		return s.Complete(context.Background(), k, tok, resp, time.Hour)
	}
}

// replayOp completes 256 keys with resp, then replays them in turn.
func replayOp(b *testing.B, s store.Store, resp []byte) func(i int) error {
	prefix := "replay-" + string(store.NewToken())[:10] + "-"
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		tok := store.NewToken()
		if _, err := s.Claim(context.Background(), keys[i], benchFP, tok, time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(context.Background(), keys[i], tok, resp, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	return func(i int) error {
		c, err := s.Claim(context.Background(), keys[i%len(keys)], benchFP, store.NewToken(), time.Minute)
		if err == nil && (c.Outcome != store.Completed || !bytes.Equal(c.Record.Response, resp)) {
			err = fmt.Errorf("replay: %v", c.Outcome)
		}
		return err
	}
}

// BenchmarkCost measures what sealing costs the caller's CPU, one goroutine
// on the memory store, sealed and plain, so the difference is the seal's own
// work per operation (the paired benchmark's ratios over a server depend on
// how busy the machine is; this does not):
//
//	go test -run '^$' -bench '^BenchmarkCost$' ./store/seal/
func BenchmarkCost(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		resp := make([]byte, size)
		_, _ = rand.Read(resp)
		for _, sealed := range []bool{false, true} {
			name := "plain"
			if sealed {
				name = "sealed"
			}
			open := func(b *testing.B) store.Store {
				var s store.Store = newMemory(b, time.Now)
				if sealed {
					s = mustSeal(b, s, testKeys(b))
				}
				return s
			}
			b.Run(fmt.Sprintf("Cycle/%dKiB/%s", size>>10, name), func(b *testing.B) {
				op := cycleOp(open(b), resp)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := op(i); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("Replay/%dKiB/%s", size>>10, name), func(b *testing.B) {
				op := replayOp(b, open(b), resp)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := op(i); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
