package dedup_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

// redisPrefix returns a key prefix of the test's own and deletes its keys
// when the test ends (on every master of a Cluster).
func redisPrefix(t testing.TB, c goredis.UniversalClient) string {
	p := "idemkit-dedup-test:" + rand.Text()[:12] + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		del := func(ctx context.Context, n *goredis.Client) error {
			iter := n.Scan(ctx, 0, p+"*", 1000).Iterator()
			for iter.Next(ctx) {
				if err := n.Del(ctx, iter.Val()).Err(); err != nil {
					return err
				}
			}
			return iter.Err()
		}
		var err error
		switch c := c.(type) {
		case *goredis.ClusterClient:
			err = c.ForEachMaster(ctx, del)
		case *goredis.Client:
			err = del(ctx, c)
		}
		if err != nil {
			t.Errorf("deleting keys under %q: %v", p, err)
		}
	})
	return p
}

// miniClock moves the store's clock, miniredis' clock and miniredis' TTLs
// together (as the redis package's own tests do).
type miniClock struct {
	mr    *miniredis.Miniredis
	clock *storetest.ManualClock
}

func (c miniClock) Now() time.Time { return c.clock.Now() }

func (c miniClock) Advance(d time.Duration) {
	c.clock.Advance(d)
	c.mr.SetTime(c.clock.Now())
	c.mr.FastForward(d)
}

func newMiniredis(t testing.TB) storetest.Subject {
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mr.SetTime(start)
	clock := miniClock{mr: mr, clock: storetest.NewManualClock(start)}
	s := redis.New(c, redis.WithPrefix(redisPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
	return storetest.Subject{Store: s, Clock: clock}
}

// newRedis is the real Redis at IDEMKIT_REDIS_ADDR (server clock).
func newRedis(t testing.TB) storetest.Subject {
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	return storetest.Subject{Store: redis.New(c, redis.WithPrefix(redisPrefix(t, c)))}
}

// newRedisCluster is the Redis Cluster at IDEMKIT_REDIS_CLUSTER_ADDRS.
func newRedisCluster(t testing.TB) storetest.Subject {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
	t.Cleanup(func() { _ = c.Close() })
	return storetest.Subject{Store: redis.New(c, redis.WithPrefix(redisPrefix(t, c)))}
}
