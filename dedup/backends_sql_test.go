package dedup_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

// uniqueName returns prefix and random lower-case letters and digits: a
// table name no other test, run or helper uses.
func uniqueName(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:12])
}

// newSQLite is a SQLite file in the test's temporary directory, with a
// manual clock.
func newSQLite(t testing.TB) storetest.Subject {
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "dedup.db"), sqlite.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	return storetest.Subject{Store: s, Clock: clock}
}

// sqliteEffects is the seeds' effect table, written with sqlite.TxFrom in
// the transaction ProcessTx runs fn in. event_id is not unique on purpose:
// a second application must show as a second row, not as an error.
func sqliteEffects(t testing.TB, subj storetest.Subject) txEffect {
	db := subj.Store.(*sqlite.Store).DB()
	table := uniqueName("dedup_effects_")
	_, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (event_id TEXT NOT NULL, amount INTEGER NOT NULL)")
	require.NoError(t, err)
	return txEffect{
		apply: func(ctx context.Context, id string) error {
			tx, ok := sqlite.TxFrom(ctx)
			if !ok {
				return errors.New("no SQLite transaction in fn's context")
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

var pgShared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// pgPool returns the pool the tests share, or skips without
// IDEMKIT_POSTGRES_URL (fails under CI=true).
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresURL(t)
	pgShared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			pgShared.err = err
			return
		}
		cfg.MaxConns = 24 // room for 20 concurrent transactions
		pgShared.pool, pgShared.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	require.NoError(t, pgShared.err)
	return pgShared.pool
}

// dropTable drops table (unquoted, from uniqueName) when the test ends.
func dropTable(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// newPostgres is a table of its own in the shared database; PostgreSQL keeps
// the time, so the clock is the real one.
func newPostgres(t testing.TB) storetest.Subject {
	pool := pgPool(t)
	table := uniqueName("dedup_test_")
	s, err := postgres.New(pool, postgres.WithTable(table))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	dropTable(t, pool, table)
	return storetest.Subject{Store: s}
}

// postgresEffects is the effect table, written with postgres.TxFrom.
func postgresEffects(t testing.TB, subj storetest.Subject) txEffect {
	pool := pgPool(t)
	table := uniqueName("dedup_effects_")
	_, err := pool.Exec(t.Context(), fmt.Sprintf("CREATE TABLE %s (event_id text NOT NULL, amount int NOT NULL)", table))
	require.NoError(t, err)
	dropTable(t, pool, table)
	return txEffect{
		apply: func(ctx context.Context, id string) error {
			tx, ok := postgres.TxFrom(ctx)
			if !ok {
				return errors.New("no PostgreSQL transaction in fn's context")
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" (event_id, amount) VALUES ($1, 1990)", id)
			return err
		},
		count: func(t testing.TB, id string) int {
			var n int
			require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table+" WHERE event_id = $1", id).Scan(&n))
			return n
		},
	}
}
