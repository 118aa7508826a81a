package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// The benchmarks run against the real Redis at IDEMKIT_REDIS_ADDR.
// BenchmarkRedis goes through the Store; BenchmarkRaw does the same work by
// hand, the least that keeps the token check on the server: the claim's SET
// NX GET PX with a ready-made value, and a complete that is a minimal
// hand-written script (rawCompleteScript: GET, compare the token, SET the
// completed value the client built, with PX), straight through go-redis,
// without encoding, decoding or checks, on the same client and server.
// Compare them in one run:
//
//	go test -run '^$' -bench 'Redis|Raw' -benchtime 2s -count 3 ./store/redis/
//
// Each reports ops/s; one op is a Claim+Complete of a new key, or one
// replay (a Claim that finds the key completed).
//
// On a shared, loaded machine the two drift apart between runs by more than
// the difference being measured. BenchmarkPaired therefore does both in the
// same loop, alternating store and raw op by op in every worker, and reports
// each one's throughput (workers / mean latency) and their ratio:
//
//	go test -run '^$' -bench Paired -benchtime 4000x -count 5 ./store/redis/

var benchWorkers = []int{1, 32}

const (
	benchLease     = time.Minute
	benchRetention = 5 * time.Minute
)

var benchResponse = []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR","created":1764464523}`)

// rawCompleteScript is raw's complete: what a hand-written token-checked
// completion does at the least, one GET and one SET. ARGV[1] is the token,
// ARGV[2] the completed value (built by the client, which knows the
// fingerprint), ARGV[3] the retention in milliseconds.
var rawCompleteScript = goredis.NewScript(fmt.Sprintf(`
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, %d, %d + #ARGV[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`, headerSize+1, headerSize))

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
	for _, s := range []*goredis.Script{completeScript, acquireScript, renewScript, releaseScript, rawCompleteScript} {
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
	s := mustNew(b, c, WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false))
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
	inProgress := encode(statusInProgress, tok, "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			keys := runKeys(prefix)
			runWorkers(b, w, func(i int) error {
				key := keys + fmt.Sprint(i)
				err := c.Do(ctx, "set", key, inProgress, "nx", "get", "px", leaseMs).Err()
				if err != goredis.Nil {
					return fmt.Errorf("claim %s: %v", key, err)
				}
				completed := encode(statusCompleted, tok, "fp", time.Now().Add(benchRetention).UnixMilli(), 1, 1, benchResponse)
				n, err := rawCompleteScript.EvalSha(ctx, c, []string{key}, string(tok), completed, retentionMs).Int64()
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
			completed := encode(statusCompleted, tok, "fp", time.Now().Add(benchRetention).UnixMilli(), 1, 1, benchResponse)
			if err := c.Set(ctx, key, completed, benchRetention).Err(); err != nil {
				b.Fatal(err)
			}
			other := encode(statusInProgress, store.NewToken(), "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
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

// benchOps returns the store op and the raw op of one case. Each is called
// with a distinct i.
type benchOps func(b *testing.B, c *goredis.Client, prefix string) (storeOp, rawOp func(i int) error)

var benchCases = []struct {
	name   string
	ops    benchOps
	phased bool // store and raw alternate in blocks (runPhased), not op by op
}{
	{"ClaimComplete", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		return claimCompleteOps(b, c, prefix, benchResponse, false)
	}, false},
	// Coalesced and Uncoalesced are ClaimComplete with coalescing on and
	// off (the default) against the same raw floor (one command per operation, from as
	// many goroutines, on the same client and pool), measured in blocks:
	// see runPhased for why.
	{"Coalesced", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		return claimCompleteOps(b, c, prefix, benchResponse, false, WithCoalescing(true))
	}, true},
	{"Uncoalesced", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		return claimCompleteOps(b, c, prefix, benchResponse, false, WithCoalescing(false))
	}, true},
	{"Replay", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		return replayOps(b, c, prefix, benchResponse)
	}, false},
	{"Contended", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		// Every worker claims one key that another token holds, as a herd
		// of duplicates of a request in flight does.
		ctx := context.Background()
		s := mustNew(b, c, WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false))
		key := runKeys("") + "hot"
		if _, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Hour); err != nil {
			b.Fatal(err)
		}
		rawKey := runKeys(prefix) + "hot"
		held := encode(statusInProgress, store.NewToken(), "fp", time.Now().Add(time.Hour).UnixMilli(), 1, 1, nil)
		if err := c.Set(ctx, rawKey, held, time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
		tok := store.NewToken()
		otherVal := encode(statusInProgress, tok, "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
		leaseMs := millis(benchLease)
		return func(int) error {
				cl, err := s.Claim(ctx, key, "fp", tok, benchLease)
				if err == nil && cl.Outcome != store.InProgress {
					err = fmt.Errorf("contended: %v", cl.Outcome)
				}
				return err
			}, func(int) error {
				v, err := c.Do(ctx, "set", rawKey, otherVal, "nx", "get", "px", leaseMs).Text()
				if err != nil || len(v) != len(held) {
					return fmt.Errorf("raw contended: %d bytes, %v", len(v), err)
				}
				return nil
			}
	}, false},
	{"Cycle1MiB", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		storeOp, rawOp := claimCompleteOps(b, c, prefix, bigResponse, true)
		return everyNth(storeOp), everyNth(rawOp)
	}, false},
	{"Replay1MiB", func(b *testing.B, c *goredis.Client, prefix string) (func(int) error, func(int) error) {
		storeOp, rawOp := replayOps(b, c, prefix, bigResponse)
		return everyNth(storeOp), everyNth(rawOp)
	}, false},
}

// bigResponse is the 1 MiB response of the *1MiB cases.
var bigResponse = func() []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}()

// bigEvery: the 1 MiB cases do real operations in two iterations of every
// bigEvery (the others return at once, on both sides alike), so one
// -benchtime suits every case. Two, an even and an odd one apart, so that
// the store goes first after a pause once and raw once.
const bigEvery = 16

func everyNth(op func(int) error) func(int) error {
	return func(i int) error {
		if r := i % bigEvery; r != 0 && r != bigEvery/2+1 {
			return nil
		}
		return op(i)
	}
}

// claimCompleteOps returns a Claim+Complete of a new key through the Store
// and raw: SET NX GET PX, then rawCompleteScript, or with
// plainSet a plain SET XX PX of the completed value, the least Redis can do
// to store a response (no token check; the value is built for each
// operation, with its header, as anything storing a record must).
func claimCompleteOps(b *testing.B, c *goredis.Client, prefix string, resp []byte, plainSet bool, opts ...Option) (func(int) error, func(int) error) {
	ctx := context.Background()
	s := mustNew(b, c, append([]Option{WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false)}, opts...)...)
	tok := store.NewToken()
	storeKeys, rawKeys := runKeys(""), runKeys(prefix)
	leaseMs, retentionMs := millis(benchLease), millis(benchRetention)
	inProgress := encode(statusInProgress, tok, "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
	return func(i int) error {
			key := storeKeys + strconv.Itoa(i)
			cl, err := s.Claim(ctx, key, "fp", tok, benchLease)
			if err != nil {
				return err
			}
			if cl.Outcome != store.Acquired {
				return fmt.Errorf("claim %s: %v", key, cl.Outcome)
			}
			return s.Complete(ctx, key, tok, resp, benchRetention)
		}, func(i int) error {
			key := rawKeys + strconv.Itoa(i)
			if err := c.Do(ctx, "set", key, inProgress, "nx", "get", "px", leaseMs).Err(); err != goredis.Nil {
				return fmt.Errorf("claim %s: %v", key, err)
			}
			completed := encode(statusCompleted, tok, "fp", time.Now().Add(benchRetention).UnixMilli(), 1, 1, resp)
			if plainSet {
				return c.SetArgs(ctx, key, completed, goredis.SetArgs{Mode: "XX", TTL: benchRetention}).Err()
			}
			n, err := rawCompleteScript.EvalSha(ctx, c, []string{key}, string(tok), completed, retentionMs).Int64()
			if err != nil || n != 1 {
				return fmt.Errorf("complete %s: %d, %v", key, n, err)
			}
			return nil
		}
}

func replayOps(b *testing.B, c *goredis.Client, prefix string, resp []byte) (func(int) error, func(int) error) {
	ctx := context.Background()
	s := mustNew(b, c, WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false))
	tok, other := store.NewToken(), store.NewToken()
	key := runKeys("") + "replay"
	if _, err := s.Claim(ctx, key, "fp", tok, benchLease); err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, key, tok, resp, benchRetention); err != nil {
		b.Fatal(err)
	}
	rawKey := runKeys(prefix) + "replay"
	completed := encode(statusCompleted, tok, "fp", time.Now().Add(benchRetention).UnixMilli(), 1, 1, resp)
	if err := c.Set(ctx, rawKey, completed, benchRetention).Err(); err != nil {
		b.Fatal(err)
	}
	otherVal := encode(statusInProgress, other, "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
	leaseMs := millis(benchLease)
	return func(int) error {
			cl, err := s.Claim(ctx, key, "fp", other, benchLease)
			if err != nil {
				return err
			}
			if cl.Outcome != store.Completed || len(cl.Record.Response) != len(resp) {
				return fmt.Errorf("replay: %v", cl.Outcome)
			}
			return nil
		}, func(int) error {
			v, err := c.Do(ctx, "set", rawKey, otherVal, "nx", "get", "px", leaseMs).Text()
			if err != nil || len(v) != len(completed) {
				return fmt.Errorf("replay: %d bytes, %v", len(v), err)
			}
			return nil
		}
}

// BenchmarkPaired runs the store's op and the raw op alternately in every
// worker (store first on even iterations, raw first on odd ones), timing
// each, so both see the same load at the same moment. It reports
// store-ops/s and raw-ops/s (workers / mean latency of each) and
// store/raw, their ratio.
func BenchmarkPaired(b *testing.B) {
	c, prefix := benchClient(b)
	for _, bc := range benchCases {
		for _, w := range benchWorkers {
			b.Run(fmt.Sprintf("%s/workers=%d", bc.name, w), func(b *testing.B) {
				storeOp, rawOp := bc.ops(b, c, prefix)
				if bc.phased {
					runPhased(b, w, storeOp, rawOp)
					return
				}
				var (
					next               atomic.Int64
					wg                 sync.WaitGroup
					mu                 sync.Mutex
					storeTime, rawTime time.Duration
					storeOps, rawOps   int64
					first              error
				)
				b.ResetTimer()
				for range w {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var st, rt time.Duration
						var sn, rn int64
						defer func() {
							mu.Lock()
							storeTime, rawTime, storeOps, rawOps = storeTime+st, rawTime+rt, storeOps+sn, rawOps+rn
							mu.Unlock()
						}()
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							for k := range 2 {
								start := time.Now()
								var err error
								if (int(i)+k)%2 == 0 {
									err = storeOp(int(i))
									st += time.Since(start)
									sn++
								} else {
									err = rawOp(int(i))
									rt += time.Since(start)
									rn++
								}
								if err != nil {
									mu.Lock()
									if first == nil {
										first = err
									}
									mu.Unlock()
									return
								}
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if first != nil {
					b.Fatal(first)
				}
				storeRate := float64(w) / (storeTime.Seconds() / float64(storeOps))
				rawRate := float64(w) / (rawTime.Seconds() / float64(rawOps))
				b.ReportMetric(storeRate, "store-ops/s")
				b.ReportMetric(rawRate, "raw-ops/s")
				b.ReportMetric(storeRate/rawRate, "store/raw")
			})
		}
	}
}

// phaseOps is the number of operations of one side in one phase of
// runPhased.
const phaseOps = 256

// runPhased runs b.N operations with w workers, the store's and raw's in
// alternating phases of phaseOps (internal/pairbench): unlike
// BenchmarkPaired's op-by-op alternation, the two never run at the same
// moment, since a store that sends concurrent operations together frees the
// server and the client's CPU, and raw operations running beside it would
// take that gain for themselves. It reports each side's throughput over its
// phases' wall time and their ratio.
func runPhased(b *testing.B, w int, storeOp, rawOp func(int) error) {
	st, raw := pairbench.Run(b, b.N, w, phaseOps, storeOp, rawOp)
	if st.N == 0 || raw.N == 0 {
		return
	}
	storeRate := float64(st.N) / st.Elapsed.Seconds()
	rawRate := float64(raw.N) / raw.Elapsed.Seconds()
	b.ReportMetric(storeRate, "store-ops/s")
	b.ReportMetric(rawRate, "raw-ops/s")
	b.ReportMetric(storeRate/rawRate, "store/raw")
}
