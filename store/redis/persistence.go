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

// ErrNoPersistence is wrapped by CheckPersistence's error when a server keeps
// nothing across a restart: append-only file off and no RDB save points.
// Such a server comes back empty after a crash or restart, every claim and
// every stored response is gone, and each retry that follows runs its
// operation again.
var ErrNoPersistence = errors.New("redis: the server keeps no data across a restart (appendonly no, no save points)")

// CheckPersistence reads appendonly and save from the server, or from every
// master of a Cluster and every shard of a Ring. It returns nil when every
// node keeps its data across a restart in some form (AOF on, or at least one
// RDB save point; an RDB snapshot still loses what was written since the
// last save, and an AOF with appendfsync everysec up to about a second); an
// error wrapping ErrNoPersistence that names each node keeping nothing; and
// a wrapped driver error when the settings cannot be read (CONFIG is
// disabled on some managed services, and not implemented by miniredis).
func (s *Store) CheckPersistence(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redis: check persistence: %w", err)
	}
	if s.client == nil {
		return fmt.Errorf("redis: check persistence: %w", errNilClient)
	}
	var (
		mu   sync.Mutex
		bad  []string
		read = func(ctx context.Context, name string, c goredis.Cmdable) error {
			// Two commands: CONFIG GET takes one parameter before Redis 7.0.
			aof, err := configValue(c.ConfigGet(ctx, "appendonly"), name, "appendonly")
			if err != nil {
				return err
			}
			save, err := configValue(c.ConfigGet(ctx, "save"), name, "save")
			if err != nil {
				return err
			}
			if !strings.EqualFold(aof, "yes") && strings.TrimSpace(save) == "" {
				mu.Lock()
				bad = append(bad, name)
				mu.Unlock()
			}
			return nil
		}
	)
	if err := s.eachNode(ctx, read); err != nil {
		return s.fail(ctx, "check persistence", err)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: %s (turn on appendonly, or set save points)", ErrNoPersistence, strings.Join(bad, ", "))
	}
	return nil
}

// configValue returns the value of one CONFIG GET parameter on node name.
func configValue(cmd *goredis.MapStringStringCmd, name, param string) (string, error) {
	m, err := cmd.Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s on %s: %w", param, name, err)
	}
	v, ok := m[param]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s on %s: no value", param, name)
	}
	return v, nil
}

// eachNode calls read for the server of a *redis.Client, for every master of
// a Cluster and for every shard of a Ring, concurrently for the last two, and
// for any other client once with the client itself.
func (s *Store) eachNode(ctx context.Context, read func(ctx context.Context, name string, c goredis.Cmdable) error) error {
	node := func(ctx context.Context, c *goredis.Client) error { return read(ctx, c.Options().Addr, c) }
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, node)
	case *goredis.Ring:
		return c.ForEachShard(ctx, node)
	case *goredis.Client:
		return node(ctx, c)
	default:
		return read(ctx, "the server", c)
	}
}

// checkPersistenceOnce runs CheckPersistence on the first call that touches
// Redis and logs its finding (see checkOnce).
func (s *Store) checkPersistenceOnce(ctx context.Context) {
	checkOnce(ctx, s.checkPersist, &s.persistState, s.CheckPersistence, func(err error) {
		switch {
		case errors.Is(err, ErrNoPersistence):
			s.log.Warn("redis: Redis keeps no data across a restart, so a restarted server forgets every claim and stored response and each retry runs its operation again; turn on appendonly (or RDB save points)",
				"error", err.Error())
		case err != nil:
			s.log.Warn("redis: could not read appendonly and save; make sure Redis persists its data, or a restart forgets every idempotency record",
				"error", err.Error())
		}
	})
}
