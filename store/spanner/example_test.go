package spanner_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
	spannerstore "github.com/idemkit/idemkit/store/spanner"
)

// Open a store by URL (the spanner:// scheme registers on import), create
// its table, and claim a key.
func Example() {
	ctx := context.Background()
	s, err := store.Open(ctx, "spanner://projects/my-project/instances/my-instance/databases/my-db")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(s)
	if err := store.Migrate(ctx, s); err != nil {
		log.Fatal(err)
	}
	c, err := s.Claim(ctx, "order-42", "fingerprint", store.NewToken(), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Outcome)
}

// InTx writes the caller's effect through the same read-write transaction
// as the key. fn may run again after an abort: everything it does goes
// through the transaction.
func ExampleStore_InTx() {
	ctx := context.Background()
	client, err := sp.NewClient(ctx, "projects/my-project/instances/my-instance/databases/my-db")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	s, err := spannerstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	tok := store.NewToken()
	err = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		c, err := st.Claim(ctx, "order-42", "fingerprint", tok, time.Minute)
		if err != nil || c.Outcome != store.Acquired {
			return err // a replay or a duplicate: nothing to do
		}
		tx, _ := spannerstore.TxFrom(ctx)
		if err := tx.BufferWrite([]*sp.Mutation{
			sp.Insert("Payments", []string{"OrderId", "Amount"}, []any{"order-42", int64(1999)}),
		}); err != nil {
			return err
		}
		return st.Complete(ctx, "order-42", tok, []byte(`{"paid":true}`), 24*time.Hour)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Schema gives the DDL for your own migrations.
func ExampleSchema() {
	for _, stmt := range spannerstore.Schema("idempotency_keys") {
		fmt.Println(stmt[:45])
	}
	// Output:
	// CREATE TABLE IF NOT EXISTS `idempotency_keys`
}
