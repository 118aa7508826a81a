package redis_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/storetest"
)

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it when t ends.
func testPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	p := "idemkit-test:" + rand.Text()[:12] + ":"
	t.Cleanup(func() { deletePrefix(t, c, p) })
	return p
}

// deletePrefix deletes every key under p, on every master of a Cluster.
func deletePrefix(t testing.TB, c goredis.UniversalClient, p string) {
	t.Helper()
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
		t.Errorf("cleaning up keys under %q: %v", p, err)
	}
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

// miniClock is the storetest.Clock of a store on miniredis: it moves the
// clock the store computes its times from, miniredis' own clock (TIME) and
// miniredis' TTLs, which only FastForward decreases.
type miniClock struct {
	mr    *miniredis.Miniredis
	clock *storetest.ManualClock
}

func newMiniClock(mr *miniredis.Miniredis, start time.Time) miniClock {
	mr.SetTime(start)
	return miniClock{mr: mr, clock: storetest.NewManualClock(start)}
}

func (c miniClock) Now() time.Time { return c.clock.Now() }

func (c miniClock) Advance(d time.Duration) {
	c.clock.Advance(d)
	c.mr.SetTime(c.clock.Now())
	c.mr.FastForward(d)
}

// newMini starts a miniredis and a client of it, both closed when t ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *goredis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return mr, c
}
