package redis_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store/redis"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does no I/O
	t.Cleanup(func() { client.Close() })
	for name, opts := range map[string][]redis.Option{
		"nil": {nil}, "nil clock": {redis.WithClock(nil)}, "nil logger": {redis.WithLogger(nil)}, "negative replicas": {redis.WithReplicas(-1, time.Second)}, "replicas without timeout": {redis.WithReplicas(1, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := redis.New(client, opts...)
			secrettest.CheckInvalid(t, "redis", err)
		})
	}
}
