package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// Lease mode: claim a key, do the work, store the response; a retry with
// the same key replays it.
func Example() {
	dir, err := os.MkdirTemp("", "idemkit-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := sqlite.Open(filepath.Join(dir, "idemkit.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	tok := store.NewToken()
	c, err := s.Claim(ctx, "order-42", "sha256-of-the-request", tok, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first request:", c.Outcome)
	if err := s.Complete(ctx, "order-42", tok, []byte(`{"order":42}`), 24*time.Hour); err != nil {
		log.Fatal(err)
	}

	c, err = s.Claim(ctx, "order-42", "sha256-of-the-request", store.NewToken(), 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retry:", c.Outcome, string(c.Record.Response))
	// Output:
	// first request: acquired
	// retry: completed {"order":42}
}

// Transactional mode: the key, the payment row and the stored response
// commit together. A duplicate waits for the commit and replays.
func ExampleStore_InTx() {
	ctx := context.Background()
	s, err := sqlite.Open(":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE payments (id INTEGER PRIMARY KEY, amount INTEGER)`); err != nil {
		log.Fatal(err)
	}

	pay := func(key string, amount int) (resp string, replayed bool, err error) {
		err = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			tok := store.NewToken()
			c, err := st.Claim(ctx, key, fmt.Sprint(amount), tok, time.Minute)
			if err != nil {
				return err
			}
			switch c.Outcome {
			case store.Completed:
				resp, replayed = string(c.Record.Response), true
				return nil
			case store.Mismatch:
				return errors.New("422: key reused with another request")
			case store.InProgress:
				return errors.New("409: in progress")
			}
			tx, _ := sqlite.TxFrom(ctx)
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO payments (amount) VALUES (?) RETURNING id`, amount).Scan(&id); err != nil {
				return err
			}
			resp = fmt.Sprintf(`{"id":%d,"amount":%d}`, id, amount)
			return st.Complete(ctx, key, tok, []byte(resp), 24*time.Hour)
		})
		return resp, replayed, err
	}

	for range 2 {
		resp, replayed, err := pay("7c1f3a52", 1990)
		fmt.Println(resp, replayed, err)
	}
	_, _, err = pay("7c1f3a52", 9999)
	fmt.Println(err)
	var n int
	_ = s.DB().QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n)
	fmt.Println("payments:", n)
	// Output:
	// {"id":1,"amount":1990} false <nil>
	// {"id":1,"amount":1990} true <nil>
	// 422: key reused with another request
	// payments: 1
}

// Schema gives the SQL for your own migrations.
func ExampleSchema() {
	ddl, err := sqlite.Schema()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	// 	key          TEXT    NOT NULL PRIMARY KEY,
	// 	fingerprint  TEXT    NOT NULL,
	// 	token        TEXT    NOT NULL,
	// 	status       INTEGER NOT NULL,
	// 	response     BLOB,
	// 	locked_until INTEGER NOT NULL,
	// 	expires_at   INTEGER NOT NULL,
	// 	attempt      INTEGER NOT NULL DEFAULT 0,
	// 	fence        INTEGER NOT NULL DEFAULT 0
	// );
	// CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
}

// New wraps a *sql.DB you already have; configure WAL and busy_timeout in
// its DSN.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "idemkit-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s, err := sqlite.New(db, sqlite.WithTable("app_idempotency_keys"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // does not close db
	if err := s.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("table:", s.Table())
	// Output:
	// table: "app_idempotency_keys"
}

// A cleanup job: Purge deletes what has expired, in short batches.
func ExampleStore_Purge() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s, err := sqlite.Open(":memory:", sqlite.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c"} {
		tok := store.NewToken()
		_, _ = s.Claim(ctx, key, "", tok, time.Minute)
		_ = s.Complete(ctx, key, tok, []byte("ok"), time.Hour)
	}
	now = now.Add(2 * time.Hour) // retention over

	n, err := s.Purge(ctx)
	fmt.Println(n, err)
	// Output:
	// 3 <nil>
}
