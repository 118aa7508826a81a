package redis_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mr, c := newMini(t)
			clock := newMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := redis.New(c, redis.WithPrefix(testPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

// TestConformanceMiniredisWithoutSetGet runs the suite against a server that
// rejects SET ... NX GET as Redis before 7.0 does (a hook answers "ERR syntax
// error" in its place), so the store must detect it and claim with its Lua
// fallback.
func TestConformanceMiniredisWithoutSetGet(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mr, c := newMini(t)
			h := &rejectSetGet{}
			c.AddHook(h)
			t.Cleanup(func() {
				if h.rejected.Load() > 1 {
					t.Errorf("SET NX GET was sent %d times after the server first rejected it", h.rejected.Load())
				}
			})
			clock := newMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := redis.New(c, redis.WithPrefix(testPrefix(t, c)), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

func TestConformanceRedis(t *testing.T) {
	c := realClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: redis.New(c, redis.WithPrefix(testPrefix(t, c)))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}

func TestConformanceCluster(t *testing.T) {
	c := clusterClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: redis.New(c, redis.WithPrefix(testPrefix(t, c)))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}

// syntaxError is a reply error as go-redis reports one from the server.
type syntaxError string

func (e syntaxError) Error() string { return string(e) }
func (syntaxError) RedisError()     {}

// rejectSetGet answers SET ... NX ... GET with "ERR syntax error" without
// sending it, as a server before Redis 7.0 would, and counts how often.
type rejectSetGet struct{ rejected atomic.Int64 }

func (h *rejectSetGet) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *rejectSetGet) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "set" && slices.Contains(cmd.Args(), any("nx")) && slices.Contains(cmd.Args(), any("get")) {
			h.rejected.Add(1)
			err := syntaxError("ERR syntax error")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *rejectSetGet) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
