package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// TestTxSecondDatabaseDoesNotJoin: a Store on a second database, called
// with the context of another Store's InTx, writes to its own database and
// commits on its own; it never joins the first Store's transaction (where
// its table does not even exist). Before stores joined only their own
// transactions, its Claim ran in the first database and failed.
func TestTxSecondDatabaseDoesNotJoin(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	dbName := uniqueName("idemkit_pg_db2_")
	_, err := pool.Exec(ctx, "CREATE DATABASE "+quote(dbName))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+quote(dbName)+" WITH (FORCE)")
		if err != nil {
			t.Errorf("drop database %s: %v", dbName, err)
		}
	})
	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	u.Path = "/" + dbName
	pool2, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool2.Close)

	a := newTestStore(t, pool)
	b, err := New(pool2, WithTable("keys_in_db2"))
	require.NoError(t, err)
	require.NoError(t, b.Migrate(ctx))

	boom := errors.New("roll back a's transaction")
	tokA, tokB := store.NewToken(), store.NewToken()
	err = a.InTx(ctx, func(ctx context.Context, ts store.Store) error {
		if _, err := ts.Claim(ctx, "k", "fp", tokA, time.Minute); err != nil {
			return err
		}
		c, err := b.Claim(ctx, "k", "fp", tokB, time.Minute)
		if err != nil {
			return err
		}
		require.Equal(t, store.Acquired, c.Outcome)
		if err := b.Complete(ctx, "k", tokB, []byte("db2"), time.Hour); err != nil {
			return err
		}
		// Nested InTx of b with a's context: b's own transaction, not a
		// savepoint of a's.
		return errors.Join(boom, b.InTx(ctx, func(ctx context.Context, bs store.Store) error {
			_, err := bs.Claim(ctx, "nested", "fp", store.NewToken(), time.Minute)
			return err
		}))
	})
	require.ErrorIs(t, err, boom)
	_, err = a.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "a's transaction rolled back")
	rec, err := b.Get(ctx, "k")
	require.NoError(t, err, "b committed on its own database")
	require.Equal(t, []byte("db2"), rec.Response)
	_, err = b.Get(ctx, "nested")
	require.NoError(t, err, "b's nested InTx committed on its own")
}
