package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/leakcheck"
	"github.com/idemkit/idemkit/internal/testenv"
)

var shared struct {
	once sync.Once
	db   *sql.DB
	err  error
}

// TestMain runs the tests, closes the shared pool, then fails the run if
// goroutines were left behind.
func TestMain(m *testing.M) {
	// The driver logs the connections the fault tests break on purpose.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	code := m.Run()
	benchCleanup()
	if shared.db != nil {
		shared.db.Close()
	}
	if code == 0 {
		if leaked := leakcheck.Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// testDB returns the pool the package's tests share (at most 16
// connections), or skips without IDEMKIT_MYSQL_DSN (fails under CI=true).
func testDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	shared.once.Do(func() {
		shared.db, shared.err = sql.Open("mysql", dsn)
		if shared.err == nil {
			shared.db.SetMaxOpenConns(16)
			shared.db.SetMaxIdleConns(16)
		}
	})
	require.NoError(t, shared.err)
	return shared.db
}

// dsnConfig is a DSN's configuration as the driver parses it.
type dsnConfig = gomysql.Config

// openDB opens a pool of its own on the test server's DSN as edit changes
// it, closed when t ends.
func openDB(t testing.TB, maxConns int, edit func(c *dsnConfig)) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if edit != nil {
		edit(cfg)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.PingContext(context.Background()))
	return db
}

// isMariaDB reports whether the test server is MariaDB (whose isolation
// variable is tx_isolation; MySQL 8's is transaction_isolation).
func isMariaDB(t testing.TB) bool {
	t.Helper()
	var v string
	require.NoError(t, testDB(t).QueryRowContext(context.Background(), "SELECT VERSION()").Scan(&v))
	return strings.Contains(v, "MariaDB")
}

// withIsolation sets the session's isolation level (for example
// "READ-COMMITTED") on every connection of the pool.
func withIsolation(t testing.TB, level string) func(c *dsnConfig) {
	name := "transaction_isolation"
	if isMariaDB(t) {
		name = "tx_isolation"
	}
	return func(c *dsnConfig) { c.Params[name] = "'" + level + "'" }
}

// uniqueName returns prefix followed by 16 random hex digits.
func uniqueName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// newTestStore returns a Store on db with its own freshly migrated table,
// dropped when the test ends.
func newTestStore(t testing.TB, db *sql.DB, opts ...Option) *Store {
	t.Helper()
	opts = append([]Option{WithTable(uniqueName("idemkit_my_"))}, opts...)
	s, err := New(db, opts...)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	dropOnCleanup(t, s)
	return s
}

// dropOnCleanup closes s and drops its table at the end of the test.
func dropOnCleanup(t testing.TB, s *Store) {
	t.Helper()
	db := testDB(t)
	t.Cleanup(func() {
		_ = s.Close()
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.Table()); err != nil {
			t.Errorf("drop table %s: %v", s.Table(), err)
		}
	})
}

// waitBlocked returns once some session is running an INSERT into table
// (quoted) that has not finished: in the tests that call it, one that waits
// for a row lock. It polls the server's process list (INNODB_TRX does not
// list a MariaDB transaction whose first write is the one waiting).
func waitBlocked(t testing.TB, table string) {
	t.Helper()
	for {
		var n int
		require.NoError(t, testDB(t).QueryRowContext(context.Background(),
			`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE COMMAND IN ('Execute', 'Query') AND INFO LIKE CONCAT('INSERT INTO ', ?, '%')`, table).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond) // polling the server, not waiting for a goroutine
	}
}
