package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// TestLinearizable checks concurrent histories under lost replies,
// timeouts (a call cancelled in flight) and retries against the contract,
// on the real Redis (one command at a time and coalesced) and on the
// Cluster.
func TestLinearizable(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func(*testing.T) goredis.UniversalClient
		opts   []redis.Option
	}{
		{"Redis", func(t *testing.T) goredis.UniversalClient { return realClient(t) }, nil},
		{"RedisCoalesced", func(t *testing.T) goredis.UniversalClient { return realClient(t) }, []redis.Option{redis.WithCoalescing(true)}},
		{"Cluster", func(t *testing.T) goredis.UniversalClient { return clusterClient(t) }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := c.client(t)
			linearize.Run(t, linearize.Harness{New: func(t *testing.T) store.Store {
				return redis.MustNew(t, cl, append([]redis.Option{redis.WithPrefix(testPrefix(t, cl))}, c.opts...)...)
			}})
		})
	}
}
