package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/storetest"
)

// withEffects gives the suite's Transactor cases an effect table of their
// own: Effect inserts a row through the transaction InTx carries in ctx
// (TxFrom), CountEffects counts the committed rows.
func withEffects(t *testing.T, db *sql.DB, sub storetest.Subject) storetest.Subject {
	t.Helper()
	table := quoteIdent(uniqueName("idemkit_my_fx_"))
	_, err := db.ExecContext(context.Background(), "CREATE TABLE "+table+" (`key` VARBINARY(1024) NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			t.Errorf("drop table %s: %v", table, err)
		}
	})
	sub.Effect = func(ctx context.Context, key string) error {
		tx, ok := TxFrom(ctx)
		if !ok {
			return errors.New("effect: the context carries no transaction")
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (`key`) VALUES (?)", key)
		return err
	}
	sub.CountEffects = func(ctx context.Context, key string) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE `key` = ?", key).Scan(&n)
		return n, err
	}
	return sub
}
