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

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkReplicas measures what WithReplicas costs on the Redis Cluster at
// IDEMKIT_REDIS_CLUSTER_ADDRS (.ci/run's has a replica per master). One op
// is a Claim+Complete of a new key, done four ways in the same loop, op by op
// in every worker, so all four see the same load at the same moment:
//
//   - store: the Store without WithReplicas
//   - store-wait: the Store with WithReplicas(1, time.Second)
//   - raw: the same commands straight through go-redis (SET NX GET PX, then
//     EVALSHA of the completion script)
//   - raw-wait: each of those pipelined with WAIT 1 1000 on the key's master
//
// Each reports ops/s (workers / mean latency) and store-wait/store:
//
//	IDEMKIT_REDIS_CLUSTER_ADDRS=127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103 \
//	  go test -run '^$' -bench Replicas -benchtime 2000x -count 3 ./store/redis/
func BenchmarkReplicas(b *testing.B) {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(b), PoolSize: 32})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		for _, s := range []*goredis.Script{completeScript, renewScript, releaseScript} {
			if err := s.Load(ctx, n).Err(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	prefix := "idemkit-bench:" + rand.Text()[:12] + ":"
	b.Cleanup(func() { testredis.DeletePrefix(b, c, prefix) })

	plain := mustNew(b, c, WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false))
	waiting := mustNew(b, c, WithPrefix(prefix), WithEvictionCheck(false), WithPersistenceCheck(false),
		WithReplicas(1, time.Second))
	tok := store.NewToken()
	// The raw claim writes what the Store's does (a lease kept
	// store.LapsedKept past its end), so the Store's completeScript, which
	// raw reuses, takes it as live.
	leaseMs, retentionMs := millis(benchLease+store.LapsedKept), millis(benchRetention)
	inProgress := encode(statusInProgress, tok, "fp", time.Now().Add(benchLease).UnixMilli(), 1, 1, nil)
	expires := encodeTime(time.Now().Add(benchRetention).UnixMilli())

	storeOp := func(s *Store) func(key string) error {
		return func(key string) error {
			cl, err := s.Claim(ctx, key, "fp", tok, benchLease)
			if err != nil {
				return err
			}
			if cl.Outcome != store.Acquired {
				return fmt.Errorf("claim %s: %v", key, cl.Outcome)
			}
			return s.Complete(ctx, key, tok, benchResponse, benchRetention)
		}
	}
	raw := func(key string) error {
		key = prefix + key
		if err := c.Do(ctx, "set", key, inProgress, "nx", "get", "px", leaseMs).Err(); err != goredis.Nil {
			return fmt.Errorf("claim %s: %v", key, err)
		}
		n, err := completeScript.EvalSha(ctx, c, []string{key}, string(tok), expires, benchResponse, retentionMs).Int64()
		if err != nil || n != 1 {
			return fmt.Errorf("complete %s: %d, %v", key, n, err)
		}
		return nil
	}
	rawWait := func(key string) error {
		key = prefix + key
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		p := node.Pipeline()
		set := p.Do(ctx, "set", key, inProgress, "nx", "get", "px", leaseMs)
		w := p.Do(ctx, "wait", 1, 1000)
		_, _ = p.Exec(ctx)
		if set.Err() != goredis.Nil || w.Val() != int64(1) {
			return fmt.Errorf("claim %s: %v, WAIT %v %v", key, set.Err(), w.Val(), w.Err())
		}
		p = node.Pipeline()
		done := completeScript.EvalSha(ctx, p, []string{key}, string(tok), expires, benchResponse, retentionMs)
		w = p.Do(ctx, "wait", 1, 1000)
		_, _ = p.Exec(ctx)
		if done.Val() != int64(1) || w.Val() != int64(1) {
			return fmt.Errorf("complete %s: %v %v, WAIT %v %v", key, done.Val(), done.Err(), w.Val(), w.Err())
		}
		return nil
	}
	ops := []struct {
		name string
		op   func(key string) error
	}{
		{"store", storeOp(plain)}, {"store-wait", storeOp(waiting)}, {"raw", raw}, {"raw-wait", rawWait},
	}

	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", workers), func(b *testing.B) {
			keys := runKeys("")
			var (
				next  atomic.Int64
				wg    sync.WaitGroup
				mu    sync.Mutex
				spent = make([]time.Duration, len(ops))
				count = make([]int64, len(ops))
				first error
			)
			b.ResetTimer()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := make([]time.Duration, len(ops))
					n := make([]int64, len(ops))
					defer func() {
						mu.Lock()
						for k := range ops {
							spent[k] += mine[k]
							count[k] += n[k]
						}
						mu.Unlock()
					}()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						for j := range ops {
							k := (int(i) + j) % len(ops) // rotate who goes first
							key := keys + ops[k].name + ":" + strconv.FormatInt(i, 10)
							start := time.Now()
							err := ops[k].op(key)
							mine[k] += time.Since(start)
							n[k]++
							if err != nil {
								mu.Lock()
								if first == nil {
									first = fmt.Errorf("%s: %w", ops[k].name, err)
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
			rate := make([]float64, len(ops))
			for k, o := range ops {
				rate[k] = float64(workers) / (spent[k].Seconds() / float64(count[k]))
				b.ReportMetric(rate[k], o.name+"-ops/s")
			}
			b.ReportMetric(rate[1]/rate[0], "store-wait/store")
			b.ReportMetric(rate[1]/rate[3], "store-wait/raw-wait")
		})
	}
}
