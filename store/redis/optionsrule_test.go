package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
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
			s, err := redis.New(client, opts...)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("got %v, %v; want an error matching store.ErrInvalid", s, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "redis: ") || strings.Count(msg, "redis: ") != 1 || strings.Count(msg, "invalid argument") != 1 {
				t.Errorf("message %q: want one %q prefix and one %q", msg, "redis: ", "invalid argument")
			}
		})
	}
}
