package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// mustNew is New for tests: a construction error fails tb at once.
func mustNew(tb testing.TB, c goredis.UniversalClient, opts ...Option) *Store {
	tb.Helper()
	s, err := New(c, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustNew exports mustNew to the redis_test package.
var MustNew = mustNew
