package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
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
