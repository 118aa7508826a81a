package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// mysqlStoreCase is the demo on MySQL/MariaDB in transactional mode, for
// storeCases (append it last: other tests pick cases by index), so the demo
// tests and the crash tests (SIGKILL before and after the commit) run on it.
func mysqlStoreCase() storeCase {
	return storeCase{"mysql", true, func(t *testing.T) config {
		dsn := testenv.MySQLDSN(t)
		c := defaultConfig()
		suffix := strings.ToLower(rand.Text()[:10])
		c.PaymentsTable = "payments_demo_" + suffix
		u, err := mysqlStoreURL(dsn, "idemkit_demo_"+suffix)
		require.NoError(t, err)
		c.Store, c.StoreURL = "mysql", u
		t.Cleanup(func() {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			defer db.Close()
			_, err = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+c.PaymentsTable+"`, `idemkit_demo_"+suffix+"`")
			assert.NoError(t, err, "cleanup")
		})
		return c
	}}
}

// TestMySQLStoreURL: the DSN form the tests and the -mysql flag take becomes
// the URL store.Open takes.
func TestMySQLStoreURL(t *testing.T) {
	u, err := mysqlStoreURL("app:s3cret@tcp(db.internal:3307)/shop?tx_isolation=%27READ-COMMITTED%27", "keys")
	require.NoError(t, err)
	assert.Equal(t, "mysql://app:s3cret@db.internal:3307/shop?table=keys&tx_isolation=%27READ-COMMITTED%27", u)
	_, err = mysqlStoreURL("", "")
	assert.Error(t, err)
	_, err = mysqlStoreURL("root@unix(/run/mysqld/mysqld.sock)/test", "")
	assert.Error(t, err)
}

// TestMySQLLedger: on a store opened from the mysql case's URL, the ledger
// writes a payment only inside the store's transaction, and rolls back with
// it.
func TestMySQLLedger(t *testing.T) {
	cfg := mysqlStoreCase().cfg(t)
	ctx := t.Context()
	st, err := store.Open(ctx, cfg.StoreURL)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close(st) })
	require.NoError(t, store.Migrate(ctx, st))
	led, ok, err := mysqlLedgerFor(ctx, st, cfg.PaymentsTable)
	require.True(t, ok)
	require.NoError(t, err)
	_, err = led.create(ctx, "alice", 1)
	assert.ErrorIs(t, err, errNoTx)
	tx := st.(store.Transactor)
	var kept payment
	require.NoError(t, tx.InTx(ctx, func(ctx context.Context, _ store.Store) error {
		kept, err = led.create(ctx, "alice", 1990)
		return err
	}))
	boom := errors.New("boom")
	require.ErrorIs(t, tx.InTx(ctx, func(ctx context.Context, _ store.Store) error {
		if _, err := led.create(ctx, "bob", 5); err != nil {
			return err
		}
		return boom
	}), boom)
	ps, err := led.list(ctx)
	require.NoError(t, err)
	assert.Equal(t, []payment{kept}, ps)
	p, found, err := led.(*mysqlLedger).get(ctx, kept.ID)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, kept, p)
	_, found, err = led.(*mysqlLedger).get(ctx, kept.ID+1)
	require.NoError(t, err)
	assert.False(t, found)
	_, ok, err = mysqlLedgerFor(ctx, nil, cfg.PaymentsTable)
	assert.False(t, ok)
	assert.NoError(t, err)
}
