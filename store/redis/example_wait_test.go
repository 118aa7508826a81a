package redis_test

import (
	"context"
	"errors"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// A claim counts only once one replica of its master has it: a Claim or
// Complete that no replica acknowledged within 100 ms fails with
// ErrNotReplicated, and the caller retries it like any store error.
func ExampleWithReplicas() {
	client := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	s, err := redis.New(client, redis.WithReplicas(1, 100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	_, err = s.Claim(ctx, "order-42", "fp", store.NewToken(), 30*time.Second)
	if errors.Is(err, redis.ErrNotReplicated) {
		// Not acknowledged by a replica: the claim was released and the work
		// did not run. Answer 503 and let the client retry.
		log.Print(err)
	}
}

// Check at start-up that every master persists its data; the Store also
// logs a warning on first use unless WithPersistenceCheck(false).
func ExampleStore_CheckPersistence() {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	s, err := redis.New(client)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.CheckPersistence(context.Background()); errors.Is(err, redis.ErrNoPersistence) {
		log.Printf("idempotency records would not survive a Redis restart: %v", err)
	}
}
