// Package testredis holds what the module's Redis tests share: a key prefix
// of the test's own that is deleted afterwards, and a storetest.Clock for
// stores on miniredis.
package testredis

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/storetest"
)

// Prefix returns base followed by a random part and a colon, a key prefix no
// other test or run uses, and deletes every key under it when t ends.
func Prefix(t testing.TB, c goredis.UniversalClient, base string) string {
	t.Helper()
	p := base + rand.Text()[:12] + ":"
	t.Cleanup(func() { DeletePrefix(t, c, p) })
	return p
}

// DeletePrefix deletes every key under p, on every master of a Cluster.
func DeletePrefix(t testing.TB, c goredis.UniversalClient, p string) {
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
		t.Errorf("deleting the keys under %q: %v", p, err)
	}
}

// MiniClock is the storetest.Clock of a store on miniredis: it moves the
// clock the store computes its times from, miniredis' own clock (TIME) and
// miniredis' TTLs, which only FastForward decreases.
type MiniClock struct {
	mr    *miniredis.Miniredis
	clock *storetest.ManualClock
}

// NewMiniClock sets mr's clock to start and returns a MiniClock at start.
func NewMiniClock(mr *miniredis.Miniredis, start time.Time) MiniClock {
	mr.SetTime(start)
	return MiniClock{mr: mr, clock: storetest.NewManualClock(start)}
}

// Now returns the time the store sees.
func (c MiniClock) Now() time.Time { return c.clock.Now() }

// Advance moves every clock forward by d.
func (c MiniClock) Advance(d time.Duration) {
	c.clock.Advance(d)
	c.mr.SetTime(c.clock.Now())
	c.mr.FastForward(d)
}
