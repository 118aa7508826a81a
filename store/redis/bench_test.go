package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// The benchmarks run against the real Redis at IDEMKIT_REDIS_ADDR.
// BenchmarkRedis goes through the Store; BenchmarkRaw sends the very same
// commands (SET NX GET PX with a ready-made value, EVALSHA of the same
// completion script) straight through go-redis, without encoding, decoding
// or checks, on the same client and server. Compare them in one run:
//
//	go test -run '^$' -bench 'Redis|Raw' -benchtime 2s -count 3 ./store/redis/
//
// Each reports ops/s; one op is a Claim+Complete of a new key, or one
// replay (a Claim that finds the key completed).

var benchWorkers = []int{1, 32}

const (
	benchLease     = time.Minute
	benchRetention = 5 * time.Minute
)

var benchResponse = []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR","created":1764464523}`)

// benchClient returns a client of the real Redis with a pool as large as
// the largest worker count, and a prefix whose keys are deleted at the end.
func benchClient(b *testing.B) (*goredis.Client, string) {
	b.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(b), PoolSize: 32})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	prefix := "idemkit-bench:" + rand.Text()[:12] + ":"
	b.Cleanup(func() {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				c.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
	})
	// Load the scripts once so no run pays for NOSCRIPT.
	for _, s := range []*goredis.Script{completeScript, renewScript, releaseScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return c, prefix
}

// runWorkers runs op b.N times split over workers goroutines and reports
// ops/s.
func runWorkers(b *testing.B, workers int, op func(i int) error) {
	b.Helper()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(int(i)); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

var benchRun atomic.Int64

// runKeys returns a key prefix unique to one call of a benchmark function.
func runKeys(prefix string) string {
	return fmt.Sprintf("%sr%d:", prefix, benchRun.Add(1))
}

func BenchmarkRedis(b *testing.B) {
	c, prefix := benchClient(b)
	ctx := context.Background()
	s := New(c, WithPrefix(prefix), WithEvictionCheck(false))
	tok := store.NewToken()
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			keys := runKeys("") // the Store adds prefix itself
			runWorkers(b, w, func(i int) error {
				key := keys + fmt.Sprint(i)
				cl, err := s.Claim(ctx, key, "fp", tok, benchLease)
				if err != nil {
					return err
				}
				if cl.Outcome != store.Acquired {
					return fmt.Errorf("claim %s: %v", key, cl.Outcome)
				}
				return s.Complete(ctx, key, tok, benchResponse, benchRetention)
			})
		})
	}
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			key := runKeys("") + "replay"
			if _, err := s.Claim(ctx, key, "fp", tok, benchLease); err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, key, tok, benchResponse, benchRetention); err != nil {
				b.Fatal(err)
			}
			other := store.NewToken()
			runWorkers(b, w, func(int) error {
				cl, err := s.Claim(ctx, key, "fp", other, benchLease)
				if err != nil {
					return err
				}
				if cl.Outcome != store.Completed || len(cl.Record.Response) != len(benchResponse) {
					return fmt.Errorf("replay: %v", cl.Outcome)
				}
				return nil
			})
		})
	}
}

func BenchmarkRaw(b *testing.B) {
	c, prefix := benchClient(b)
	ctx := context.Background()
	tok := store.NewToken()
	leaseMs, retentionMs := millis(benchLease), millis(benchRetention)
	inProgress := encode(statusInProgress, tok, "fp", time.Now().Add(benchLease).UnixMilli(), nil)
	expires := encodeTime(time.Now().Add(benchRetention).UnixMilli())
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			keys := runKeys(prefix)
			runWorkers(b, w, func(i int) error {
				key := keys + fmt.Sprint(i)
				err := c.Do(ctx, "set", key, inProgress, "nx", "get", "px", leaseMs).Err()
				if err != goredis.Nil {
					return fmt.Errorf("claim %s: %v", key, err)
				}
				n, err := completeScript.EvalSha(ctx, c, []string{key}, string(tok), expires, benchResponse, retentionMs).Int64()
				if err != nil || n != 1 {
					return fmt.Errorf("complete %s: %d, %v", key, n, err)
				}
				return nil
			})
		})
	}
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			key := runKeys(prefix) + "replay"
			completed := encode(statusCompleted, tok, "fp", time.Now().Add(benchRetention).UnixMilli(), benchResponse)
			if err := c.Set(ctx, key, completed, benchRetention).Err(); err != nil {
				b.Fatal(err)
			}
			other := encode(statusInProgress, store.NewToken(), "fp", time.Now().Add(benchLease).UnixMilli(), nil)
			runWorkers(b, w, func(int) error {
				v, err := c.Do(ctx, "set", key, other, "nx", "get", "px", leaseMs).Text()
				if err != nil || len(v) != len(completed) {
					return fmt.Errorf("replay: %d bytes, %v", len(v), err)
				}
				return nil
			})
		})
	}
}
