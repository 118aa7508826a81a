package postgres

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// walMeter measures the WAL a function makes for one table. The server is
// shared with other tests, so the global WAL position moves for reasons of
// its own; with pg_walinspect (PostgreSQL 15+, created here when the role may)
// the meter counts only the records that touch the table's relations (heap,
// indexes, TOAST) and the commit records of their transactions. Without it, it
// falls back to the global position and takes the smallest of several tries.
type walMeter struct {
	t        *testing.T
	conn     *pgx.Conn
	inspect  bool
	patterns []string // block_ref LIKE patterns of the table's relations
}

func newWALMeter(t *testing.T, conn *pgx.Conn, s *Store) *walMeter {
	t.Helper()
	ctx := context.Background()
	m := &walMeter{t: t, conn: conn}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockID+1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect")
		return err
	})
	if err != nil {
		t.Logf("pg_walinspect unavailable (%v): measuring the server's whole WAL instead", err)
		return m
	}
	m.inspect = true
	rows, err := conn.Query(ctx, `SELECT pg_relation_filenode(c.oid)::text FROM pg_class c
WHERE c.oid = $1::regclass
   OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass)
   OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = $1::regclass)
   OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = $1::regclass))`, s.Table())
	require.NoError(t, err)
	for rows.Next() {
		var f string
		require.NoError(t, rows.Scan(&f))
		m.patterns = append(m.patterns, "%/"+f+" fork%")
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(m.patterns), 3, "heap, primary key and expiry index")
	return m
}

func (m *walMeter) lsn(q string) string {
	m.t.Helper()
	var l string
	require.NoError(m.t, m.conn.QueryRow(context.Background(), q).Scan(&l))
	return l
}

// measure runs fn and returns the WAL bytes attributed to the table.
func (m *walMeter) measure(fn func()) int64 {
	m.t.Helper()
	ctx := context.Background()
	before := m.lsn("SELECT pg_current_wal_insert_lsn()::text")
	fn()
	after := m.lsn("SELECT pg_current_wal_insert_lsn()::text")
	var global int64
	require.NoError(m.t, m.conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", after, before).Scan(&global))
	if !m.inspect || global == 0 {
		return global
	}
	// pg_get_wal_records_info reads flushed WAL only: wait for the WAL writer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var flushed bool
		require.NoError(m.t, m.conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", after).Scan(&flushed))
		if flushed {
			break
		}
		require.True(m.t, time.Now().Before(deadline), "WAL not flushed up to %s", after)
		time.Sleep(10 * time.Millisecond) // polling the server, not waiting for a goroutine
	}
	var records, bytes int64
	require.NoError(m.t, m.conn.QueryRow(ctx, `WITH r AS (
	SELECT start_lsn, xid::text AS xid, record_length, block_ref FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
), mine AS (SELECT * FROM r WHERE block_ref LIKE ANY ($3::text[]))
SELECT count(*), coalesce(sum(record_length), 0)::bigint FROM r
WHERE start_lsn IN (SELECT start_lsn FROM mine)
   OR (xid <> '0' AND xid IN (SELECT xid FROM mine WHERE xid <> '0'))`, before, after, m.patterns).Scan(&records, &bytes))
	m.t.Logf("WAL: %d bytes in %d records for the table, %d bytes on the whole server meanwhile", bytes, records, global)
	return bytes
}

// min returns the fewest bytes fn caused over up to tries runs, stopping at
// the first run that wrote none (one run suffices with pg_walinspect).
func (m *walMeter) min(tries int, fn func()) int64 {
	m.t.Helper()
	if m.inspect {
		tries = 1
	}
	best := int64(-1)
	for range tries {
		n := m.measure(fn)
		if best < 0 || n < best {
			best = n
		}
		if best == 0 {
			break
		}
	}
	return best
}

type rowVersion struct {
	ctid       string
	xmin, xmax string
}

func version(t *testing.T, conn *pgx.Conn, s *Store, key string) rowVersion {
	t.Helper()
	var v rowVersion
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT ctid::text, xmin::text, xmax::text FROM "+s.Table()+" WHERE key = $1", key).Scan(&v.ctid, &v.xmin, &v.xmax))
	return v
}

// TestReplayWritesNothing: a Claim of a completed key (a replay) takes no
// transaction id, no row lock, makes no new row version and writes no WAL,
// so it never waits for a commit flush. The same measurement on the
// single-statement ON CONFLICT DO UPDATE claim shows it does write, so the
// test can tell the difference.
func TestReplayWritesNothing(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, conn)

	tok := store.NewToken()
	c, err := s.Claim(ctx, "paid", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.NoError(t, s.Complete(ctx, "paid", tok, []byte(`{"id":1}`), time.Hour))

	replay := func() {
		c, err := s.Claim(ctx, "paid", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, c.Outcome)
	}
	replay() // prepares the statement and sets the row's hint bits
	v0 := version(t, conn, s, "paid")

	// No transaction id: nothing to lock with, nothing to commit.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	txs := &Store{db: tx, opts: s.opts, table: s.table, sql: s.sql, stats: s.stats}
	c, err = txs.Claim(ctx, "paid", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	var xid *string
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::text").Scan(&xid))
	require.Nil(t, xid, "a replay must not take a transaction id")
	require.NoError(t, tx.Rollback(ctx))

	const replays = 200
	wal := newWALMeter(t, conn, s)
	n := wal.min(10, func() {
		for range replays {
			replay()
		}
	})
	t.Logf("WAL bytes for %d replays: %d", replays, n)
	require.Zero(t, n, "replays must write no WAL")
	require.Equal(t, v0, version(t, conn, s, "paid"), "no new row version, no lock (xmax)")

	// Control: the one-statement DO UPDATE claim writes on every replay.
	doUpdate := `INSERT INTO ` + s.Table() + ` AS t (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval)
ON CONFLICT (key) DO UPDATE SET token = CASE WHEN t.expires_at <= clock_timestamp() THEN EXCLUDED.token ELSE t.token END
RETURNING t.token`
	const writing = 50
	w := wal.min(3, func() {
		for range writing {
			var got string
			require.NoError(t, conn.QueryRow(ctx, doUpdate, "paid", "fp", string(store.NewToken()), interval(time.Minute)).Scan(&got))
			require.Equal(t, string(tok), got)
		}
	})
	t.Logf("WAL bytes for %d replays through ON CONFLICT DO UPDATE: %d (%.0f per replay)", writing, w, float64(w)/writing)
	require.Greater(t, w, int64(writing*50), "the measurement sees a writing replay")
	require.NotEqual(t, v0, version(t, conn, s, "paid"))
}

// counter counts what a connection does: statements through the tracer,
// and writes to the socket, each of which is one round trip (pgx sends a
// whole statement, or a whole prepare, in one write and waits for the reply).
type counter struct {
	queries, prepares, writes atomic.Int64
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}
func (c *counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (c *counter) reset() { c.queries.Store(0); c.prepares.Store(0); c.writes.Store(0) }

type countingConn struct {
	net.Conn
	c *counter
}

func (cc countingConn) Write(b []byte) (int, error) {
	cc.c.writes.Add(1)
	return cc.Conn.Write(b)
}

// TestRoundTrips counts the statements and socket round trips of every
// path, after a warm-up that has prepared each statement once, with Claim
// pinned to each of its first statements: insert first (a new key is one
// round trip) and read first (a replay, a held key, a mismatch is one).
func TestRoundTrips(t *testing.T) {
	for _, mode := range []struct {
		name string
		pin  int8
	}{{"InsertFirst", 1}, {"ReadFirst", 2}} {
		t.Run(mode.name, func(t *testing.T) { roundTrips(t, mode.pin) })
	}
}

func roundTrips(t *testing.T, pin int8) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testenv.PostgresURL(t))
	require.NoError(t, err)
	cnt := &counter{}
	cfg.Tracer = cnt
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, c: cnt}, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, conn)
	s.stats.pin = pin

	type step struct {
		name  string
		setup func(key string) // not counted
		run   func(key string)
		// round trips with Claim inserting first, and reading first
		insertFirst, readFirst int64
	}
	other := store.NewToken()
	mine := store.NewToken()
	claim := func(key, fp string, tok store.Token, lease time.Duration, want store.Outcome) {
		c, err := s.Claim(ctx, key, fp, tok, lease)
		require.NoError(t, err)
		require.Equal(t, want, c.Outcome, key)
	}
	steps := []step{
		{"new key", nil, func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) }, 1, 2},
		{"replay", func(k string) {
			claim(k, "fp", other, time.Minute, store.Acquired)
			require.NoError(t, s.Complete(ctx, k, other, []byte("r"), time.Hour))
		}, func(k string) { claim(k, "fp", mine, time.Minute, store.Completed) }, 2, 1},
		{"held by another", func(k string) { claim(k, "fp", other, time.Minute, store.Acquired) },
			func(k string) { claim(k, "fp", mine, time.Minute, store.InProgress) }, 2, 1},
		{"mismatch", func(k string) { claim(k, "fp", other, time.Minute, store.Acquired) },
			func(k string) { claim(k, "fp2", mine, time.Minute, store.Mismatch) }, 2, 1},
		{"renew own lease", func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) },
			func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) }, 3, 2},
		{"take over lapsed lease", func(k string) { claim(k, "fp", other, time.Microsecond, store.Acquired) },
			func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) }, 3, 2},
		{"complete", func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) },
			func(k string) { require.NoError(t, s.Complete(ctx, k, mine, []byte("r"), time.Hour)) }, 1, 1},
		{"complete, lease lost", func(k string) { claim(k, "fp", other, time.Minute, store.Acquired) },
			func(k string) {
				require.ErrorIs(t, s.Complete(ctx, k, mine, []byte("r"), time.Hour), store.ErrLeaseLost)
			}, 1, 1},
		{"release", func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) },
			func(k string) { require.NoError(t, s.Release(ctx, k, mine)) }, 1, 1},
		{"get", func(k string) { claim(k, "fp", mine, time.Minute, store.Acquired) },
			func(k string) { _, err := s.Get(ctx, k); require.NoError(t, err) }, 1, 1},
		{"get absent", nil, func(k string) { _, err := s.Get(ctx, k); require.ErrorIs(t, err, store.ErrNotFound) }, 1, 1},
	}
	for round := range 2 { // round 0 prepares the statements
		for _, st := range steps {
			key := st.name + "/" + string(rune('0'+round))
			if st.setup != nil {
				st.setup(key)
			}
			cnt.reset()
			st.run(key)
			if round == 1 {
				want := st.insertFirst
				if pin == 2 {
					want = st.readFirst
				}
				require.Zero(t, cnt.prepares.Load(), "%s: statements come from the cache", st.name)
				require.Equal(t, want, cnt.writes.Load(), "%s: round trips", st.name)
				require.Equal(t, want, cnt.queries.Load(), "%s: statements", st.name)
			}
		}
	}
}

// TestHotPathAllocations: the Store's replay and claim+complete allocate no
// more than a caller running the least SQL for the same work with pgx
// directly (one SELECT of the row; a plain INSERT … ON CONFLICT DO NOTHING
// and the UPDATE), with the same arguments and fresh scan destinations,
// give or take a few.
func TestHotPathAllocations(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, conn)
	args := []string{"done", "fp", string(store.NewToken())} // not constants: boxed like the Store's
	key, fp, tok := args[0], args[1], store.Token(args[2])
	_, err = s.Claim(ctx, key, fp, tok, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, key, tok, []byte(`{"id":1}`), time.Hour))

	sel := `SELECT fingerprint, token, status, response, expires_at FROM ` + s.Table() + ` WHERE key = $1`
	ins := `INSERT INTO ` + s.Table() + ` (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval) ON CONFLICT (key) DO NOTHING`
	raw := func() {
		var r row
		require.NoError(t, conn.QueryRow(ctx, sel, key).Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt))
	}
	replay := func() {
		c, err := s.Claim(ctx, key, fp, tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, c.Outcome)
	}
	raw()
	replay()
	rawAllocs := testing.AllocsPerRun(50, raw)
	storeAllocs := testing.AllocsPerRun(50, replay)
	t.Logf("replay: Store %.0f allocations, raw SELECT %.0f", storeAllocs, rawAllocs)
	require.LessOrEqual(t, storeAllocs, rawAllocs+3)

	keys := make([]string, 200)
	for i := range keys {
		keys[i] = uniqueName("k")
	}
	n := 0
	rawCC := testing.AllocsPerRun(50, func() {
		k := keys[n]
		n++
		tag, err := conn.Exec(ctx, ins, k, fp, string(tok), interval(time.Minute))
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		_, err = conn.Exec(ctx, s.sql.complete, k, string(tok), []byte("r"), interval(time.Minute))
		require.NoError(t, err)
	})
	n = 100
	storeCC := testing.AllocsPerRun(50, func() {
		k := keys[n]
		n++
		_, err := s.Claim(ctx, k, fp, tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, k, tok, []byte("r"), time.Minute))
	})
	t.Logf("claim+complete: Store %.0f allocations, raw statements %.0f", storeCC, rawCC)
	// The claim reads a row back (the raw INSERT reads none): the scan's
	// destinations, its argument slice and the timestamptz plan.
	require.LessOrEqual(t, storeCC, rawCC+5)
}
