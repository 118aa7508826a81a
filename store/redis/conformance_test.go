package redis_test

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mr, c := newMini(t)
			clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

// runConformanceEach runs the suite on miniredis, the real Redis and the
// Cluster, with every Store passed through wrap (which sets the path under
// test) before the suite sees it.
func runConformanceEach(t *testing.T, wrap func(*redis.Store) *redis.Store) {
	t.Run("Miniredis", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			New: func(t *testing.T) storetest.Subject {
				mr, c := newMini(t)
				clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
				return storetest.Subject{Store: wrap(s), Clock: clock}
			},
		})
	})
	for _, srv := range []struct {
		name   string
		client func(*testing.T) goredis.UniversalClient
	}{
		{"Redis", func(t *testing.T) goredis.UniversalClient { return realClient(t) }},
		{"Cluster", func(t *testing.T) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(srv.name, func(t *testing.T) {
			c := srv.client(t)
			storetest.Run(t, storetest.Harness{
				New: func(t *testing.T) storetest.Subject {
					return storetest.Subject{Store: wrap(redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c))))}
				},
				ShortLease: 200 * time.Millisecond,
			})
		})
	}
}

// TestConformanceWatchedComplete runs the suite with every Complete, small
// responses too, taking the WATCH path (WATCH, GET, then SET in MULTI/EXEC
// instead of the completion script), on miniredis, on the real Redis and on
// the Cluster: its fencing, retried-Complete and race rows then prove that
// path as well.
func TestConformanceWatchedComplete(t *testing.T) {
	t.Parallel() // see TestConformanceRedis
	runConformanceEach(t, redis.WatchEveryComplete)
}

// TestConformanceStagedComplete runs the suite with every Complete, small
// responses too, taking the path large responses take first: the completed
// value staged with a plain SET under a key in the record's slot, then
// checked and renamed over the record by commitScript in the same pipeline.
// Its fencing, retried-Complete and race rows prove that path, on
// miniredis, the real Redis, the Cluster and a Ring.
func TestConformanceStagedComplete(t *testing.T) {
	t.Parallel() // see TestConformanceRedis
	runConformanceEach(t, redis.StageEveryComplete)
	t.Run("Ring", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			New: func(t *testing.T) storetest.Subject {
				start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
				a, b := miniredis.RunT(t), miniredis.RunT(t)
				ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
				t.Cleanup(func() { ring.Close() })
				clock := ringClock{testredis.NewMiniClock(a, start), b}
				b.SetTime(start)
				s := redis.MustNew(t, ring, redis.WithPrefix("idemkit-test:"), redis.WithClock(clock.Now),
					redis.WithLogger(slog.New(slog.DiscardHandler)))
				return storetest.Subject{Store: redis.StageEveryComplete(s), Clock: clock}
			},
		})
	})
}

// TestConformanceMiniredisWithoutSetGet runs the suite against a server that
// rejects SET ... NX GET as Redis before 7.0 does (a hook answers "ERR syntax
// error" in its place), so the store must detect it and claim with its Lua
// fallback. TestSetGetFallback checks the switch happens once.
func TestConformanceMiniredisWithoutSetGet(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mr, c := newMini(t)
			c.AddHook(&rejectSetGet{})
			clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)), redis.WithClock(clock.Now),
				redis.WithEvictionCheck(false), redis.WithLogger(slog.New(slog.DiscardHandler)))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

// TestConformanceRedis runs the suite on the real Redis. It and the other
// runs against the real servers (TestConformanceCluster,
// TestConformanceCoalesced, TestConformanceWatchedComplete,
// TestConformanceStagedComplete) spend their time waiting for leases to
// lapse (about 4 s of CPU in 44 s), each under prefixes of its own, so they
// run in parallel with each other, once the package's other tests (some
// read server-wide counters such as commandstats) have finished.
func TestConformanceRedis(t *testing.T) {
	t.Parallel()
	c := realClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel() // see TestConformanceRedis
	c := clusterClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}

// syntaxError is a reply error as go-redis reports one from the server.
type syntaxError string

func (e syntaxError) Error() string { return string(e) }
func (syntaxError) RedisError()     {}

// rejectSetGet answers SET ... NX ... GET with "ERR syntax error" without
// sending it, as a server before Redis 7.0 would, and counts how often.
type rejectSetGet struct{ rejected atomic.Int64 }

func (h *rejectSetGet) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *rejectSetGet) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "set" && slices.Contains(cmd.Args(), any("nx")) && slices.Contains(cmd.Args(), any("get")) {
			h.rejected.Add(1)
			err := syntaxError("ERR syntax error")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *rejectSetGet) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestConformanceRing runs the suite on a go-redis Ring of two miniredis
// shards: every call touches one key, so client-side sharding works too.
func TestConformanceRing(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			a, b := miniredis.RunT(t), miniredis.RunT(t)
			ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
			t.Cleanup(func() { ring.Close() })
			clock := ringClock{testredis.NewMiniClock(a, start), b}
			b.SetTime(start)
			s := redis.MustNew(t, ring, redis.WithPrefix("idemkit-test:"), redis.WithClock(clock.Now),
				redis.WithLogger(slog.New(slog.DiscardHandler)))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

// ringClock moves the store's clock and both shards.
type ringClock struct {
	testredis.MiniClock
	other *miniredis.Miniredis
}

func (c ringClock) Advance(d time.Duration) {
	c.MiniClock.Advance(d)
	c.other.SetTime(c.Now())
	c.other.FastForward(d)
}
