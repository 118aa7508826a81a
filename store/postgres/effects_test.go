package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/storetest"
)

// withEffects gives the suite's Transactor cases an effect table of their
// own: Effect inserts a row through the transaction InTx carries in ctx
// (TxFrom), CountEffects counts the committed rows.
func withEffects(t *testing.T, pool *pgxpool.Pool, sub storetest.Subject) storetest.Subject {
	t.Helper()
	table := quote(uniqueName("idemkit_pg_fx_"))
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+table+` (key text NOT NULL)`)
	require.NoError(t, err)
	dropOnCleanup(t, "TABLE", table)
	sub.Effect = func(ctx context.Context, key string) error {
		tx, ok := TxFrom(ctx)
		if !ok {
			return errors.New("effect: the context carries no transaction")
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` (key) VALUES ($1)`, key)
		return err
	}
	sub.CountEffects = func(ctx context.Context, key string) (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE key = $1`, key).Scan(&n)
		return n, err
	}
	return sub
}
