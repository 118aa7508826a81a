package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/cache"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// mustCache wraps inner, failing t on error.
func mustCache(t testing.TB, inner store.Store, opts ...cache.Option) cache.Store {
	t.Helper()
	c, err := cache.New(inner, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newMemory returns a memory store on clock, closed when t ends.
func newMemory(t testing.TB, clock func() time.Time) *memory.Store {
	t.Helper()
	m, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestConformanceMemory runs the suite on the cache over the memory store,
// both on one manual clock, with no margin (the cache serves a record up to
// the last instant it is live) and with the default one.
func TestConformanceMemory(t *testing.T) {
	for name, margin := range map[string]time.Duration{"NoMargin": 0, "DefaultMargin": cache.DefaultMargin} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				New: func(t *testing.T) storetest.Subject {
					clock := storetest.NewManualClock(start)
					s := mustCache(t, newMemory(t, clock.Now), cache.WithClock(clock.Now), cache.WithMargin(margin))
					return storetest.Subject{Store: s, Clock: clock}
				},
			})
		})
	}
}

// TestConformanceTinyCache runs the suite on a cache of four entries and
// 2 KiB, so that evictions happen inside the suite's own cases.
func TestConformanceTinyCache(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(start)
			s := mustCache(t, newMemory(t, clock.Now), cache.WithClock(clock.Now), cache.WithMargin(0),
				cache.WithMaxEntries(4), cache.WithMaxBytes(2048))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mr := miniredis.RunT(t)
			c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { c.Close() })
			clock := testredis.NewMiniClock(mr, start)
			r, err := redis.New(c, redis.WithClock(clock.Now), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
			if err != nil {
				t.Fatal(err)
			}
			return storetest.Subject{Store: mustCache(t, r, cache.WithClock(clock.Now)), Clock: clock}
		},
	})
}

// realRedis returns a client of the Redis at IDEMKIT_REDIS_ADDR (skipping
// without it, failing under CI), closed when t ends.
func realRedis(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", c.Options().Addr, err)
	}
	return c
}

// newRedis returns a Redis store under a prefix of t's own, deleted when t ends.
func newRedis(t testing.TB, c goredis.UniversalClient) *redis.Store {
	t.Helper()
	r, err := redis.New(c, redis.WithPrefix(testredis.Prefix(t, c, "idemkit-cache-test:")), redis.WithPersistenceCheck(false))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConformanceRedis(t *testing.T) {
	c := realRedis(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: mustCache(t, newRedis(t, c))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}
