package dedup_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/redis"
)

// mustMemory is memory.New for tests: a construction error fails tb at once.
func mustMemory(tb testing.TB, opts ...memory.Option) *memory.Store {
	tb.Helper()
	s, err := memory.New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// mustRedis is redis.New for tests: a construction error fails tb at once.
func mustRedis(tb testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	tb.Helper()
	s, err := redis.New(c, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
