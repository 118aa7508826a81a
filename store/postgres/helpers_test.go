package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
)

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
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
