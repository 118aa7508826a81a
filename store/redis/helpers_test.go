package redis_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
)

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it when t ends.
func testPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	return testredis.Prefix(t, c, "idemkit-test:")
}

// realClient returns a client of the real Redis at IDEMKIT_REDIS_ADDR
// (skipping without it, failing under CI), closed when t ends.
func realClient(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("real Redis at %s: %v", c.Options().Addr, err)
	}
	return c
}

// clusterClient returns a client of the Redis Cluster at
// IDEMKIT_REDIS_CLUSTER_ADDRS, closed when t ends.
func clusterClient(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		return n.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("Redis Cluster: %v", err)
	}
	return c
}

// newMini starts a miniredis and a client of it, both closed when t ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *goredis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return mr, c
}
