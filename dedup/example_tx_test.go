package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/sqlite"
)

// The processed_events pattern on SQLite: the event id and the effect's row
// commit in one transaction, which fn gets from its context. A delivery that
// fails after writing rolls both back, so its redelivery runs again.
func ExampleDeduper_ProcessTx() {
	ctx := context.Background()
	st, err := sqlite.Open(":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE payments (event_id TEXT, amount INTEGER)"); err != nil {
		log.Fatal(err)
	}
	e, err := idem.New(st)
	if err != nil {
		log.Fatal(err)
	}
	d, err := dedup.New(e, dedup.WithScope("payments-queue"))
	if err != nil {
		log.Fatal(err)
	}

	attempt := 0
	consume := func(id string, amount int) {
		out, err := d.ProcessTx(ctx, id, func(ctx context.Context) error {
			tx, ok := sqlite.TxFrom(ctx)
			if !ok {
				return errors.New("no transaction")
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO payments VALUES (?, ?)", id, amount); err != nil {
				return err
			}
			if attempt++; attempt == 1 {
				return errors.New("ledger service timed out") // after the insert: rolled back
			}
			return nil
		})
		fmt.Printf("%s: %v, %v, err=%v\n", id, out, out.Action(), err)
	}
	consume("pay_1", 1990) // fails after its insert
	consume("pay_1", 1990) // redelivered: runs again
	consume("pay_1", 1990) // redelivered once more: duplicate

	var n, total int
	if err := st.DB().QueryRowContext(ctx, "SELECT count(*), coalesce(sum(amount), 0) FROM payments").Scan(&n, &total); err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", n, "total:", total)
	// Output:
	// pay_1: failed, retry, err=ledger service timed out
	// pay_1: processed, ack, err=<nil>
	// pay_1: duplicate, ack, err=<nil>
	// rows: 1 total: 1990
}
