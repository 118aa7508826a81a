package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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
		read = func(ctx context.Context, name string, c goredis.Cmdable) error {
			p, err := configValue(c.ConfigGet(ctx, "maxmemory-policy"), name, "maxmemory-policy")
			if err != nil {
				return err
			}
			if p != "noeviction" {
				mu.Lock()
				bad = append(bad, name+" has "+p)
				mu.Unlock()
			}
			return nil
		}
	)
	err := s.eachNode(ctx, read)
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
// and logs its finding (see checkOnce).
func (s *Store) checkPolicyOnce(ctx context.Context) {
	checkOnce(ctx, s.checkPolicy, &s.policyState, s.CheckEviction, func(err error) {
		switch {
		case errors.Is(err, ErrEvictionPolicy):
			s.log.Warn("redis: Redis may evict idempotency records under memory pressure, and a retried operation would then run twice; set maxmemory-policy to noeviction",
				"error", err.Error())
		case err != nil:
			s.log.Warn("redis: could not read maxmemory-policy; make sure it is noeviction, or idempotency records may be evicted",
				"error", err.Error())
		}
	})
}

// checkOnce runs check on the first call that touches Redis, when enabled,
// and hands its result to report. Concurrent first calls do not wait for it;
// a check cut short by the caller's context is tried again on a later call.
// state is 0 (not checked), 1 (checking) or 2 (done).
func checkOnce(ctx context.Context, enabled bool, state *atomic.Int32, check func(context.Context) error, report func(error)) {
	if !enabled || state.Load() == 2 || !state.CompareAndSwap(0, 1) {
		return
	}
	err := check(ctx)
	if ctx.Err() != nil {
		state.Store(0)
		return
	}
	state.Store(2)
	report(err)
}
