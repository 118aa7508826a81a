package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

func TestNewRejects(t *testing.T) {
	pool := testPool(t)
	_, err := New(nil)
	require.Error(t, err)
	for _, opts := range [][]Option{
		{WithTable("")},
		{WithTable(strings.Repeat("t", maxTableLen+1))},
		{WithTable("a\x00b")},
		{WithSchema(strings.Repeat("s", 64))},
		{WithPurgeBatch(0)},
		{WithTable("t"), nil},
	} {
		_, err := New(pool, opts...)
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "postgres: new: "), err.Error())
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = Schema(opts...)
		require.ErrorIs(t, err, store.ErrInvalid)
	}
	s, err := New(pool, WithTable(strings.Repeat("t", maxTableLen)))
	require.NoError(t, err)
	require.NotNil(t, s)
}

func TestSchemaDefault(t *testing.T) {
	ddl, err := Schema()
	require.NoError(t, err)
	require.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "idempotency_keys" (`)
	require.Contains(t, ddl, `CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);`)
	ddl, err = Schema(WithSchema("idem"), WithTable("keys"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(ddl, `CREATE SCHEMA IF NOT EXISTS "idem";`), ddl)
	require.Contains(t, ddl, `ON "idem"."keys" (expires_at)`)
}

// TestHostileNames: table and schema names are always quoted identifiers,
// so names with quotes, spaces, capitals and SQL in them are just names,
// and the exported Schema creates what the Store uses.
func TestHostileNames(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	schema := uniqueName(`Idem "Schema"; DROP TABLE x; -- `)
	table := `Keys "quoted"; DROP`
	dropOnCleanup(t, "SCHEMA", quote(schema))
	s, err := New(pool, WithSchema(schema), WithTable(table))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, s.Schema()) // the exported DDL, as a migration tool would run it
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx), "Migrate after the DDL is a no-op")
	tok := store.NewToken()
	c, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.NoError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Hour))
	var n int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 AND indexname = $3",
		schema, table, table+indexSuffix).Scan(&n))
	require.Equal(t, 1, n, "the expiry index exists under its expected name")
}

// TestMigrateConcurrently: several processes migrating the same new schema
// and table at once all succeed.
func TestMigrateConcurrently(t *testing.T) {
	pool := testPool(t)
	schema := uniqueName("idemkit_pg_schema_")
	dropOnCleanup(t, "SCHEMA", quote(schema))
	const n = 8
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := New(pool, WithSchema(schema), WithTable("keys"))
			if err == nil {
				<-start
				err = s.Migrate(context.Background())
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "migration %d", i)
	}
}

func TestPurge(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithPurgeBatch(7))
	ctx := context.Background()
	// 30 completed records past their retention and 20 in-progress ones
	// whose lease lapsed more than store.LapsedKept ago (deleted); 15
	// lapsed more recently, one of them a moment short of LapsedKept ago
	// (kept, for their attempt count); 10 live in-progress and 10 live
	// completed ones.
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (key, fingerprint, token, status, response, expires_at)
SELECT 'old-done-' || i, '', 't', 2, '\x00'::bytea, clock_timestamp() - interval '1 minute' FROM generate_series(1, 30) i
UNION ALL SELECT 'old-lease-' || i, '', 't', 1, NULL, clock_timestamp() - interval '24 hours 1 second' FROM generate_series(1, 20) i
UNION ALL SELECT 'lapsed-' || i, '', 't', 1, NULL, clock_timestamp() - interval '1 second' FROM generate_series(1, 14) i
UNION ALL SELECT 'lapsed-edge', '', 't', 1, NULL, clock_timestamp() - interval '23 hours 59 minutes'
UNION ALL SELECT 'live-lease-' || i, '', 't', 1, NULL, clock_timestamp() + interval '1 hour' FROM generate_series(1, 10) i
UNION ALL SELECT 'live-done-' || i, '', 't', 2, '\x00', clock_timestamp() + interval '1 hour' FROM generate_series(1, 10) i`, s.Table()))
	require.NoError(t, err)
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 50, n)
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+s.Table()+" WHERE key LIKE 'live-%'").Scan(&left))
	require.Equal(t, 20, left)
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+s.Table()+" WHERE key LIKE 'lapsed-%'").Scan(&left))
	require.Equal(t, 15, left, "lapsed leases are kept for store.LapsedKept")
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+s.Table()).Scan(&left))
	require.Equal(t, 35, left)
	n, err = s.Purge(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestPurgeUsesExpiryIndex: on a large analyzed table with few expired
// rows, the batch's SELECT reads the expires_at index, not the whole table.
func TestPurgeUsesExpiryIndex(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (key, fingerprint, token, status, response, expires_at)
SELECT 'k' || i, '', 't', 2, '\x00', clock_timestamp() + (i %% 1000 - 5) * interval '1 second' FROM generate_series(1, 50000) i`, s.Table()))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+s.Table())
	require.NoError(t, err)
	var plan strings.Builder
	rows, err := pool.Query(ctx, "EXPLAIN "+strings.Replace(s.sql.purge, "$1", "1000", 1))
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan.String(), indexSuffix, plan.String())
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	require.Positive(t, n)
}

// TestStatementsUsePrimaryKey guards against ENGINE-NOTES' trap: with the
// generic plan forced (what a long-lived prepared statement ends up with),
// every key statement reads the primary key on a large analyzed table.
func TestStatementsUsePrimaryKey(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	s := newTestStore(t, pool)
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (key, fingerprint, token, status, response, expires_at)
SELECT 'k' || i, '', 't', 2, '\x00', clock_timestamp() + interval '1 hour' FROM generate_series(1, 20000) i`, s.Table()))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+s.Table())
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer func() {
		_, err := conn.Exec(context.Background(), "RESET plan_cache_mode")
		assert.NoError(t, err)
		conn.Release()
	}()
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	for name, c := range map[string]struct {
		sql  string
		args string
	}{
		"claim":    {s.sql.claim, `('k1', '', 't', '1 minute')`},
		"reread":   {s.sql.reread, `('k1')`},
		"takeover": {s.sql.takeover, `('k1', '', 't', '1 minute', 't')`},
		"renew":    {s.sql.renew, `('k1', 't', '1 minute')`},
		"complete": {s.sql.complete, `('k1', 't', '\x00', '1 minute')`},
		"release":  {s.sql.release, `('k1', 't')`},
		"get":      {s.sql.get, `('k1')`},
	} {
		stmt := "idemkit_plan_" + name
		_, err := conn.Conn().Prepare(ctx, stmt, c.sql)
		require.NoError(t, err, name)
		tx, err := conn.Begin(ctx) // EXPLAIN ANALYZE would run it: plain EXPLAIN, rolled back anyway
		require.NoError(t, err)
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE "+stmt+c.args)
		require.NoError(t, err, name)
		var plan strings.Builder
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan.WriteString(line + "\n")
		}
		require.NoError(t, rows.Err())
		require.NoError(t, tx.Rollback(ctx))
		require.Contains(t, plan.String(), "_pkey", "%s plan:\n%s", name, plan.String())
		require.NotContains(t, plan.String(), "Seq Scan", "%s plan:\n%s", name, plan.String())
		require.NoError(t, conn.Conn().Deallocate(ctx, stmt))
	}
}
