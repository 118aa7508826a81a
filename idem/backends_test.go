package idem_test

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/sqlite"
)

func uniqueName(prefix string) string { return prefix + strings.ToLower(rand.Text()[:12]) }

// backends returns a fresh store on every backend the machine has: memory,
// SQLite, and (when their variables are set) PostgreSQL and Redis.
func backends(t *testing.T) map[string]store.Store {
	m := map[string]store.Store{"memory": newMemory(t), "sqlite": newSQLite(t)}
	if testenvSet("IDEMKIT_POSTGRES_URL") || testenv.InCI() {
		m["postgres"] = newPostgres(t)
	}
	if testenvSet("IDEMKIT_REDIS_ADDR") || testenv.InCI() {
		c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { _ = c.Close() })
		m["redis"] = mustRedis(t, c, redis.WithPrefix(testredis.Prefix(t, c, "idemkit-idem-test:")))
	}
	return m
}

func newSQLite(t testing.TB) *sqlite.Store {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

func pgPool(t testing.TB) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func dropTable(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

func newPostgres(t testing.TB) *postgres.Store {
	pool := pgPool(t)
	table := uniqueName("idem_test_")
	s, err := postgres.New(pool, postgres.WithTable(table))
	require.NoError(t, err)
	dropTable(t, pool, table)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// txBackend is a store.Transactor with an effect table written through its
// transaction.
type txBackend struct {
	s     store.Store
	apply func(ctx context.Context, k string) error
	count func(t testing.TB, k string) int
}

func txBackends(t *testing.T) map[string]txBackend {
	m := map[string]txBackend{}
	ls := newSQLite(t)
	db := ls.DB()
	lt := uniqueName("idem_effects_")
	_, err := db.ExecContext(t.Context(), "CREATE TABLE "+lt+" (k TEXT NOT NULL)")
	require.NoError(t, err)
	m["sqlite"] = txBackend{s: ls,
		apply: func(ctx context.Context, k string) error {
			tx, ok := sqlite.TxFrom(ctx)
			if !ok {
				return errors.New("no transaction")
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO "+lt+" (k) VALUES (?)", k)
			return err
		},
		count: func(t testing.TB, k string) int {
			var n int
			require.NoError(t, db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+lt+" WHERE k = ?", k).Scan(&n))
			return n
		}}
	if testenvSet("IDEMKIT_POSTGRES_URL") || testenv.InCI() {
		ps := newPostgres(t)
		pool := pgPool(t)
		pt := uniqueName("idem_effects_")
		_, err := pool.Exec(t.Context(), "CREATE TABLE "+pt+" (k text NOT NULL)")
		require.NoError(t, err)
		dropTable(t, pool, pt)
		m["postgres"] = txBackend{s: ps,
			apply: func(ctx context.Context, k string) error {
				tx, ok := postgres.TxFrom(ctx)
				if !ok {
					return errors.New("no transaction")
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+pt+" (k) VALUES ($1)", k)
				return err
			},
			count: func(t testing.TB, k string) int {
				var n int
				require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pt+" WHERE k = $1", k).Scan(&n))
				return n
			}}
	}
	return m
}
