package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// ErrEvictionPolicy is wrapped by CheckEviction's error when a server's
// maxmemory-policy is not noeviction.
var ErrEvictionPolicy = errors.New("redis: maxmemory-policy may evict idempotency records")

// CheckEviction reads maxmemory-policy from the server, or from every master
// of a Cluster and every shard of a Ring. It returns nil when every node says
// noeviction; an error wrapping ErrEvictionPolicy that names each node and
// its policy when some node may evict keys (volatile-* policies evict exactly
// the keys with a TTL, which every record has); and a wrapped driver error
// when the policy cannot be read (CONFIG is disabled on some managed
// services, and not implemented by miniredis).
func (s *Store) CheckEviction(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redis: check eviction: %w", err)
	}
	if s.client == nil {
		return fmt.Errorf("redis: check eviction: %w", errNilClient)
	}
	var (
		mu   sync.Mutex
		bad  []string
		read = func(ctx context.Context, c *goredis.Client) error {
			m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
			if err != nil {
				return fmt.Errorf("CONFIG GET maxmemory-policy on %s: %w", c.Options().Addr, err)
			}
			p, ok := m["maxmemory-policy"]
			if !ok {
				return fmt.Errorf("CONFIG GET maxmemory-policy on %s: no value", c.Options().Addr)
			}
			if p != "noeviction" {
				mu.Lock()
				bad = append(bad, c.Options().Addr+" has "+p)
				mu.Unlock()
			}
			return nil
		}
		err error
	)
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *goredis.Ring:
		err = c.ForEachShard(ctx, read)
	case *goredis.Client:
		err = read(ctx, c)
	default:
		m, cerr := c.ConfigGet(ctx, "maxmemory-policy").Result()
		switch {
		case cerr != nil:
			err = fmt.Errorf("CONFIG GET maxmemory-policy: %w", cerr)
		case m["maxmemory-policy"] != "noeviction":
			bad = append(bad, "the server has "+m["maxmemory-policy"])
		}
	}
	if err != nil {
		return s.fail(ctx, "check eviction", err)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: %s (set it to noeviction)", ErrEvictionPolicy, strings.Join(bad, ", "))
	}
	return nil
}

// checkPolicyOnce runs CheckEviction on the first call that touches Redis
// and logs its finding. Concurrent first calls do not wait for it; a check
// cut short by the caller's context is tried again on a later call.
func (s *Store) checkPolicyOnce(ctx context.Context) {
	if !s.checkPolicy || s.policyState.Load() == 2 || !s.policyState.CompareAndSwap(0, 1) {
		return
	}
	err := s.CheckEviction(ctx)
	if ctx.Err() != nil {
		s.policyState.Store(0)
		return
	}
	s.policyState.Store(2)
	switch {
	case errors.Is(err, ErrEvictionPolicy):
		s.log.Warn("redis: Redis may evict idempotency records under memory pressure, and a retried operation would then run twice; set maxmemory-policy to noeviction",
			"error", err.Error())
	case err != nil:
		s.log.Warn("redis: could not read maxmemory-policy; make sure it is noeviction, or idempotency records may be evicted",
			"error", err.Error())
	}
}
