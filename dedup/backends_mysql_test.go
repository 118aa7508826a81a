package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/mysql"
	"github.com/idemkit/idemkit/storetest"
)

// The MySQL/MariaDB backend joins the cross-backend tests from here, so
// that adding it touches no other file.
func init() {
	backends = append(backends, backend{name: "mysql", new: newMySQL, tx: mysqlEffects})
}

// myDB returns a pool of the test's own, closed when it ends (the package
// checks for leaked goroutines), or skips without IDEMKIT_MYSQL_DSN (fails
// under CI=true).
func myDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(24) // room for 20 concurrent transactions
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newMySQL is a table of its own in the shared database; the server keeps
// the time, so the clock is the real one.
func newMySQL(t testing.TB) storetest.Subject {
	db := myDB(t)
	table := uniqueName("dedup_test_")
	s, err := mysql.New(db, mysql.WithTable(table))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	t.Cleanup(func() {
		_ = s.Close()
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.Table()); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	return storetest.Subject{Store: s}
}

// mysqlEffects is the effect table, written with mysql.TxFrom.
func mysqlEffects(t testing.TB, subj storetest.Subject) txEffect {
	db := subj.Store.(*mysql.Store).DB()
	table := uniqueName("dedup_effects_")
	_, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (event_id VARBINARY(1024) NOT NULL, amount INT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	return txEffect{
		apply: func(ctx context.Context, id string) error {
			tx, ok := mysql.TxFrom(ctx)
			if !ok {
				return errors.New("no MySQL transaction in fn's context")
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (event_id, amount) VALUES (?, 1990)", id)
			return err
		},
		count: func(t testing.TB, id string) int {
			var n int
			require.NoError(t, db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table+" WHERE event_id = ?", id).Scan(&n))
			return n
		},
	}
}
