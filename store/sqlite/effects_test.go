package sqlite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

// withEffects gives the suite's Transactor cases an effect table in s's
// database: Effect inserts a row through the transaction InTx carries in
// ctx (sqlite.TxFrom), CountEffects counts the committed rows.
func withEffects(t *testing.T, s *sqlite.Store, sub storetest.Subject) storetest.Subject {
	t.Helper()
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE storetest_effects (key TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	sub.Effect = func(ctx context.Context, key string) error {
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return errors.New("effect: the context carries no transaction")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO storetest_effects (key) VALUES (?)`, key)
		return err
	}
	sub.CountEffects = func(ctx context.Context, key string) (int, error) {
		var n int
		err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM storetest_effects WHERE key = ?`, key).Scan(&n)
		return n, err
	}
	return sub
}
