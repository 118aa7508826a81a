package postgres

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// TestConformanceEachClaimStatement runs the suite, its concurrent races
// included, with Claim pinned to each of its two statements, so both are
// proven whichever the Store would pick.
func TestConformanceEachClaimStatement(t *testing.T) {
	pool := testPool(t)
	for _, c := range []struct {
		name string
		pin  int8
	}{{"InsertFirst", 1}, {"ReadFirst", 2}} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				New: func(t *testing.T) storetest.Subject {
					s := newTestStore(t, pool)
					s.stats.pin = c.pin
					return storetest.Subject{Store: s}
				},
			})
		})
	}
}

// buffers runs EXPLAIN (ANALYZE, BUFFERS) of q with args and returns the
// shared buffers the whole statement touched.
func buffers(t *testing.T, conn *pgx.Conn, q string, args ...any) int {
	t.Helper()
	var out string
	require.NoError(t, conn.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&out))
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	require.Len(t, plan, 1)
	return plan[0].Plan.Hit + plan[0].Plan.Read
}

// TestClaimServerWork measures with EXPLAIN (ANALYZE, BUFFERS), on a table of
// 20,000 rows, the buffers each claim statement touches against the least
// statement for the same work: the insert-first claim of a new key against
// a plain INSERT … ON CONFLICT DO NOTHING, and the read-first claim of a
// completed key (a replay) against a plain SELECT. Each must touch no more.
// The control — inserting first, a completed key costs the INSERT's probe
// and then the SELECT's — shows the measurement tells them apart, which is
// why Claim picks its first statement by what recent claims met.
func TestClaimServerWork(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, conn)
	_, err = conn.Exec(ctx, `INSERT INTO `+s.Table()+` (key, fingerprint, token, status, response, expires_at)
SELECT 'pre-' || i, 'fp', 'tok-' || i, 2, '\x7b7d'::bytea, clock_timestamp() + interval '1 day' FROM generate_series(0, 19999) i`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "VACUUM (ANALYZE) "+s.Table())
	require.NoError(t, err)

	lease := interval(time.Minute)
	sel := `SELECT fingerprint, token, status, response, expires_at FROM ` + s.Table() + ` WHERE key = $1`
	ins := `INSERT INTO ` + s.Table() + ` (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval) ON CONFLICT (key) DO NOTHING`
	// Several rounds, each on fresh keys, alternating who goes first; the
	// minimum of each is what the statement needs.
	const rounds = 5
	minOf := func(f func(i int) int) int {
		m := 1 << 30
		for i := range rounds {
			m = min(m, f(i))
		}
		return m
	}
	tok := string(store.NewToken())
	plainInsert := minOf(func(i int) int { return buffers(t, conn, ins, "raw-"+strconv.Itoa(i), "fp", tok, lease) })
	claimNew := minOf(func(i int) int { return buffers(t, conn, s.sql.claim, "new-"+strconv.Itoa(i), "fp", tok, lease) })
	plainSelect := minOf(func(i int) int { return buffers(t, conn, sel, "pre-"+strconv.Itoa(100+i)) })
	readReplay := minOf(func(i int) int { return buffers(t, conn, s.sql.reread, "pre-"+strconv.Itoa(200+i)) })
	insertReplay := minOf(func(i int) int { // the INSERT meets the row, then the SELECT reads it
		k := "pre-" + strconv.Itoa(300+i)
		return buffers(t, conn, s.sql.claim, k, "fp", tok, lease) + buffers(t, conn, s.sql.reread, k)
	})
	t.Logf("new key: plain INSERT %d buffers, insert-first claim %d", plainInsert, claimNew)
	t.Logf("replay: plain SELECT %d buffers, read-first claim %d, insert-first claim %d", plainSelect, readReplay, insertReplay)
	require.LessOrEqual(t, claimNew, plainInsert, "a new key costs no more than a plain INSERT")
	require.LessOrEqual(t, readReplay, plainSelect, "a replay costs no more than a plain SELECT")
	require.Greater(t, insertReplay, plainSelect, "control: inserting first probes a taken key twice")
}

// sqlTracer records the SQL of every query on a connection.
type sqlTracer struct {
	mu  sync.Mutex
	sql []string
}

func (c *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.sql = append(c.sql, d.SQL)
	c.mu.Unlock()
	return ctx
}
func (c *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *sqlTracer) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sql[len(c.sql)-1]
}

// TestClaimAdapts: claims of new keys use the insert-first statement;
// after a few replays, claims start with the plain SELECT (a replay is that
// one statement; a new key that and the insert); after a few new keys, the
// insert-first statement again.
func TestClaimAdapts(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testenv.PostgresURL(t))
	require.NoError(t, err)
	tr := &sqlTracer{}
	cfg.Tracer = tr
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := newTestStore(t, conn)
	tok := store.NewToken()
	uses := func(want string) {
		t.Helper()
		got := tr.last()
		require.True(t, got == want, "claim ran %q", strings.SplitN(got, "\n", 2)[0])
	}

	for i := range 3 {
		c, err := s.Claim(ctx, "new-"+strconv.Itoa(i), "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		uses(s.sql.claim)
	}
	require.NoError(t, s.Complete(ctx, "new-0", tok, []byte("r"), time.Hour))
	var replayed []string
	for range 2*foundCap + 2 {
		c, err := s.Claim(ctx, "new-0", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, c.Outcome)
		replayed = append(replayed, tr.last())
	}
	require.Equal(t, s.sql.reread, replayed[len(replayed)-1], "after many replays, claims read first")
	n := len(tr.sql)
	c, err := s.Claim(ctx, "fresh", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.Equal(t, []string{s.sql.reread, s.sql.claim}, tr.sql[n:], "a new key while reading first: the SELECT, then the insert")
	// The switch back: new keys again.
	for i := range 2*foundCap + 2 {
		c, err := s.Claim(ctx, "again-"+strconv.Itoa(i), "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
	}
	uses(s.sql.claim)
}
