package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/mysql"
)

// The DDL to put in your own migrations.
func ExampleSchema() {
	ddl, err := mysql.Schema()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS `idempotency_keys` (
	// 	`key`       VARBINARY(1024) NOT NULL,
	// 	fingerprint VARBINARY(1024) NOT NULL,
	// 	token       VARBINARY(128) NOT NULL,
	// 	status      TINYINT NOT NULL CHECK (status IN (1, 2)),
	// 	response    LONGBLOB NULL,
	// 	expires_at  DATETIME(6) NOT NULL,
	// 	attempt     INT UNSIGNED NOT NULL DEFAULT 0,
	// 	fence       BIGINT UNSIGNED NOT NULL DEFAULT 0,
	// 	PRIMARY KEY (`key`),
	// 	KEY `idempotency_keys_expires_at_idx` (expires_at)
	// ) ENGINE=InnoDB ROW_FORMAT=DYNAMIC;
}

// Transactional mode: the key, the payment and the stored response commit
// together. A concurrent duplicate waits for the commit and replays; an
// error rolls everything back and frees the key. It runs against the server
// named by IDEMKIT_MYSQL_DSN and prints nothing without it.
func ExampleStore_InTx() {
	dsn := os.Getenv("IDEMKIT_MYSQL_DSN") // e.g. root@tcp(127.0.0.1:3306)/test
	if dsn == "" {
		return
	}
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s, err := mysql.New(db, mysql.WithTable("example_idempotency_keys"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	defer db.ExecContext(ctx, "DROP TABLE IF EXISTS example_idempotency_keys, example_payments")
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_payments (
		id BIGINT AUTO_INCREMENT PRIMARY KEY, amount BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	pay := func(key string, amount int64) (string, error) {
		var answer string
		err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			tok := store.NewToken()
			c, err := st.Claim(ctx, key, fmt.Sprint("amount=", amount), tok, 30*time.Second)
			if err != nil {
				return err
			}
			switch c.Outcome {
			case store.Completed:
				answer = "replay " + string(c.Record.Response)
				return nil
			case store.Mismatch:
				return errors.New("422: key reused with another request")
			case store.InProgress:
				return errors.New("409: in progress")
			}
			tx, _ := mysql.TxFrom(ctx)
			res, err := tx.ExecContext(ctx, "INSERT INTO example_payments (amount) VALUES (?)", amount)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			answer = fmt.Sprintf(`{"payment":%d}`, id)
			return st.Complete(ctx, key, tok, []byte(answer), 24*time.Hour)
		})
		return answer, err
	}
	first, err := pay("user-42:7c1f3a52", 1990)
	if err != nil {
		log.Fatal(err)
	}
	again, err := pay("user-42:7c1f3a52", 1990)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first)
	fmt.Println(again)
}
