package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
)

// The DDL to put in your own migrations.
func ExampleSchema() {
	ddl, err := postgres.Schema()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	// 	key         text COLLATE "C" PRIMARY KEY,
	// 	fingerprint text NOT NULL,
	// 	token       text NOT NULL,
	// 	status      smallint NOT NULL CHECK (status IN (1, 2)),
	// 	response    bytea,
	// 	expires_at  timestamptz NOT NULL,
	// 	attempt     integer NOT NULL DEFAULT 0,
	// 	fence       bigint NOT NULL DEFAULT 0
	// );
	// CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
	// ALTER TABLE "idempotency_keys" ADD COLUMN IF NOT EXISTS attempt integer NOT NULL DEFAULT 0,
	// 	ADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT 0;
}

// Connect with your own pgxpool, create the table, and claim a key in lease
// mode: for work whose effect is outside the database.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.WithTable("idempotency_keys"))
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	tok := store.NewToken()
	c, err := s.Claim(ctx, "user-42:7c1f3a52", "sha256-of-request", tok, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	switch c.Outcome {
	case store.Acquired:
		// Do the work (forward the key to the payment provider), then store the answer.
		if err := s.Complete(ctx, "user-42:7c1f3a52", tok, []byte(`{"id":1}`), 24*time.Hour); err != nil {
			log.Fatal(err)
		}
	case store.Completed:
		fmt.Printf("replay %s\n", c.Record.Response)
	case store.InProgress:
		fmt.Println("409, retry after", time.Until(c.Record.LockedUntil))
	case store.Mismatch:
		fmt.Println("422: key reused with another request")
	}
}

// Transactional mode: the key, the payment and the stored response commit
// together. A concurrent duplicate waits for the commit and replays; an
// error rolls everything back and frees the key.
func ExampleStore_InTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool)
	if err != nil {
		log.Fatal(err)
	}

	var paymentID int64
	err = s.InTx(ctx, func(ctx context.Context, ks store.Store) error {
		tok := store.NewToken()
		c, err := ks.Claim(ctx, "user-42:7c1f3a52", "POST /payments amount=1990", tok, time.Minute)
		if err != nil {
			return err
		}
		switch c.Outcome {
		case store.Completed:
			paymentID, err = strconv.ParseInt(string(c.Record.Response), 10, 64)
			return err // a replay: nothing was written
		case store.Mismatch:
			return fmt.Errorf("422: key reused with another request")
		case store.InProgress:
			return fmt.Errorf("409: held by a lease-mode caller")
		}
		tx, _ := postgres.TxFrom(ctx)
		if err := tx.QueryRow(ctx,
			"INSERT INTO payments (user_id, amount) VALUES ($1, $2) RETURNING id", 42, 1990).Scan(&paymentID); err != nil {
			return err
		}
		return ks.Complete(ctx, "user-42:7c1f3a52", tok, []byte(strconv.FormatInt(paymentID, 10)), 24*time.Hour)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment", paymentID)
}

// Delete expired records from a periodic job.
func ExampleStore_Purge() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(pool, postgres.WithPurgeBatch(1000))
	if err != nil {
		log.Fatal(err)
	}
	for range time.Tick(time.Hour) {
		n, err := s.Purge(ctx)
		if err != nil {
			log.Print(err)
			continue
		}
		log.Printf("purged %d idempotency records", n)
	}
}
