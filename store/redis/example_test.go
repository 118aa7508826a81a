package redis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// A payment handler claims the idempotency key, does the work once, stores
// the response, and replays it for a retry. miniredis stands in for Redis
// here; in production pass your own *redis.Client or *redis.ClusterClient.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
	defer client.Close()

	s, err := redis.New(client, redis.WithPrefix("payments:idem:"), redis.WithEvictionCheck(false))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	pay := func(key string) string {
		tok := store.NewToken()
		c, err := s.Claim(ctx, key, "POST /payments amount=1999", tok, 30*time.Second)
		if err != nil {
			return "error: " + err.Error()
		}
		switch c.Outcome {
		case store.Acquired:
			resp := []byte(`{"id":"pay_1","status":"succeeded"}`) // charge the card once
			if err := s.Complete(ctx, key, tok, resp, 24*time.Hour); err != nil {
				return "error: " + err.Error()
			}
			return "charged: " + string(resp)
		case store.Completed:
			return "replayed: " + string(c.Record.Response)
		default:
			return c.Outcome.String()
		}
	}

	fmt.Println(pay("order-42"))
	fmt.Println(pay("order-42"))
	fmt.Println(mr.Keys())
	// Output:
	// charged: {"id":"pay_1","status":"succeeded"}
	// replayed: {"id":"pay_1","status":"succeeded"}
	// [payments:idem:order-42]
}

// With a Redis Cluster every record is one key, so every call goes to the
// node that owns the key's slot.
func ExampleNew_cluster() {
	client := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true, // a cancelled context ends a call promptly
	})
	defer client.Close()
	s, err := redis.New(client, redis.WithPrefix("idem:"))
	if err != nil {
		log.Fatal(err)
	}
	_ = s // use s as a store.Store
}
