package dedup_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

// redisPrefix returns a key prefix of the test's own and deletes its keys
// when the test ends (on every master of a Cluster).
func redisPrefix(t testing.TB, c goredis.UniversalClient) string {
	return testredis.Prefix(t, c, "idemkit-dedup-test:")
}

func newMiniredis(t testing.TB) storetest.Subject {
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := mustRedis(t, c, redis.WithPrefix(redisPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
	return storetest.Subject{Store: s, Clock: clock}
}

// newRedis is the real Redis at IDEMKIT_REDIS_ADDR (server clock).
func newRedis(t testing.TB) storetest.Subject {
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	return storetest.Subject{Store: mustRedis(t, c, redis.WithPrefix(redisPrefix(t, c)))}
}

// newRedisCluster is the Redis Cluster at IDEMKIT_REDIS_CLUSTER_ADDRS.
func newRedisCluster(t testing.TB) storetest.Subject {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
	t.Cleanup(func() { _ = c.Close() })
	return storetest.Subject{Store: mustRedis(t, c, redis.WithPrefix(redisPrefix(t, c)))}
}
