package dynamodb_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamodb"
)

// A payment handler claims the idempotency key, does the work once, stores
// the response, and replays it for a retry. The client is the SDK's own,
// from the usual AWS configuration. (Not run by go test: it needs DynamoDB;
// this package's tests run the same calls against a local server.)
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
	if err != nil {
		log.Fatal(err)
	}
	s, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), "payments_idempotency")
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil { // creates the table on-demand, with TTL
		log.Fatal(err)
	}

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
}

// A Store chosen by configuration: the URL names the table, the region and,
// for a local DynamoDB-compatible server, its endpoint.
func Example_open() {
	ctx := context.Background()
	s, err := store.Open(ctx, "dynamodb://payments_idempotency?region=us-east-1&endpoint=http://127.0.0.1:8000")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(s)
	if err := store.Migrate(ctx, s); err != nil {
		log.Fatal(err)
	}
	c, err := s.Claim(ctx, "order-42", "", store.NewToken(), 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Outcome)
}
