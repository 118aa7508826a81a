package nats_test

import (
	"context"
	"fmt"
	"log"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
)

// New on a connection of the caller's own, Migrate to create the bucket
// (three replicas on a cluster), then the Store's calls.
func Example() {
	ctx := context.Background()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	s, err := idemnats.New(nc, "idempotency", idemnats.WithReplicas(3))
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	tok := store.NewToken()
	c, err := s.Claim(ctx, "order-42", "fp", tok, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if c.Outcome == store.Acquired {
		// ... do the work once ...
		if err := s.Complete(ctx, "order-42", tok, []byte(`{"ok":true}`), 24*time.Hour); err != nil {
			log.Fatal(err)
		}
	}
}

// Bad input is refused before anything is sent: New checks its options,
// store.Open its URL.
func Example_invalid() {
	_, err := store.Open(context.Background(), "nats://127.0.0.1:4222/idempotency?replicas=7")
	fmt.Println(err)
	// Output: store: open nats://127.0.0.1:4222/idempotency?replicas=7: invalid argument: WithReplicas(7): the replica count must be 1 to 5
}
