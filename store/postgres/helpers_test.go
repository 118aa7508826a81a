package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/leakcheck"
	"github.com/idemkit/idemkit/internal/testenv"
)

// The connections callers bring all satisfy DB.
var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (*pgxpool.Conn)(nil)
	_ DB = (*pgx.Conn)(nil)
	_ DB = pgx.Tx(nil)
)

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// cleanups run after all tests and benchmarks, before the pool closes.
var cleanups []func()

// TestMain runs the tests, drops the benchmark table, closes the shared
// pool, then fails the run if goroutines were left behind (as
// leakcheck.Main does, which cannot run cleanup before its check).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if shared.pool != nil {
		shared.pool.Close()
	}
	if code == 0 {
		if leaked := leakcheck.Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// testPool returns the pool the package's tests share (at most 16
// connections), or skips without IDEMKIT_POSTGRES_URL (fails under CI=true).
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresURL(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 16
		shared.pool, shared.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	require.NoError(t, shared.err)
	return shared.pool
}

// uniqueName returns prefix followed by 16 random hex digits.
func uniqueName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// newTestStore returns a Store on db with its own freshly migrated table,
// dropped when the test ends.
func newTestStore(t testing.TB, db DB, opts ...Option) *Store {
	t.Helper()
	opts = append([]Option{WithTable(uniqueName("idemkit_pg_"))}, opts...)
	s, err := New(db, opts...)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	dropOnCleanup(t, "TABLE", s.Table())
	return s
}

// dropOnCleanup drops the named (already quoted) table or schema at the end of the test.
func dropOnCleanup(t testing.TB, kind, quoted string) {
	t.Helper()
	pool := testPool(t)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP "+kind+" IF EXISTS "+quoted+" CASCADE")
		if err != nil {
			t.Errorf("drop %s %s: %v", kind, quoted, err)
		}
	})
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }
