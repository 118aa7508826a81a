package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// benchRows is how many completed records the benchmark table holds before
// the benchmarks start (vacuumed and analyzed, so plans use the primary key
// as they would on a production table, not the sequential scan of a fresh
// empty table).
const benchRows = 200_000

var bench struct {
	once sync.Once
	s    *Store
	err  error
	run  atomic.Int64 // makes the keys of each benchmark run unique
	// coalesced is a second Store on the same pool and table, with
	// WithCoalescing(true), for BenchmarkPaired's Coalesced case.
	coalesced *Store
}

// benchStore returns a Store on a preloaded table shared by all benchmarks
// of this process, dropped by TestMain's cleanup, on a pool of 16
// connections. With IDEMKIT_BENCH_SYNC_COMMIT=off its sessions commit
// without waiting for the WAL flush, which takes the disk out of the
// figures and leaves the cost of the statements and of the Go code.
// IDEMKIT_BENCH_COALESCE=off (or on) sets WithCoalescing, for the figures
// without (or with) it; IDEMKIT_BENCH_SLOTS and IDEMKIT_BENCH_MAX_BATCH set
// the batches in flight and the calls per batch, to choose the defaults.
func benchStore(b *testing.B) *Store {
	b.Helper()
	url := testenv.PostgresURL(b)
	bench.once.Do(func() {
		ctx := context.Background()
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			bench.err = err
			return
		}
		cfg.MaxConns = 16
		if v := os.Getenv("IDEMKIT_BENCH_SYNC_COMMIT"); v != "" {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = v
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			bench.err = err
			return
		}
		cleanups = append(cleanups, pool.Close) // runs after the DROP below
		table := uniqueName("idemkit_pg_bench_")
		var tuning []Option
		for env, set := range map[string]func(*options, int){
			"IDEMKIT_BENCH_SLOTS":     func(o *options, n int) { o.slots = n },
			"IDEMKIT_BENCH_MAX_BATCH": func(o *options, n int) { o.maxBatch = n },
		} {
			if n, err := strconv.Atoi(os.Getenv(env)); err == nil {
				tuning = append(tuning, func(o *options) error { set(o, n); return nil })
			}
		}
		opts := append([]Option{WithTable(table)}, tuning...)
		if v := os.Getenv("IDEMKIT_BENCH_COALESCE"); v != "" {
			opts = append(opts, WithCoalescing(v != "off"))
		}
		bench.coalesced, err = New(pool, append([]Option{WithTable(table), WithCoalescing(true)}, tuning...)...)
		if err != nil {
			bench.err = err
			return
		}
		s, err := New(pool, opts...)
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err == nil {
			cleanups = append([]func(){func() {
				_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+s.Table())
			}}, cleanups...)
			_, err = pool.Exec(ctx, `INSERT INTO `+s.Table()+` (key, fingerprint, token, status, response, expires_at)
SELECT 'pre-' || i, 'fp', 'tok-' || i, 2, convert_to('{"id":' || i || '}', 'UTF8'), clock_timestamp() + interval '1 day'
FROM generate_series(0, $1 - 1) i`, benchRows)
		}
		if err == nil {
			// VACUUM sets the rows' hint bits, which the first reader of
			// each freshly inserted row would otherwise pay for.
			_, err = pool.Exec(ctx, "VACUUM (ANALYZE) "+s.Table())
		}
		bench.s, bench.err = s, err
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.s
}

// runWorkers runs op b.N times spread over exactly workers goroutines and
// reports the throughput as ops/s.
func runWorkers(b *testing.B, workers int, op func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// benchWorkers are the numbers of concurrent callers the benchmarks run
// with; IDEMKIT_BENCH_WORKERS (a comma-separated list) sets others.
var benchWorkers = func() []int {
	var ws []int
	for _, f := range strings.Split(os.Getenv("IDEMKIT_BENCH_WORKERS"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			ws = append(ws, n)
		}
	}
	if len(ws) == 0 {
		return []int{1, 16}
	}
	return ws
}()

// BenchmarkPostgres measures the Store; BenchmarkRaw runs the very same
// statements with pgx directly on the same pool and table, for comparison.
// Run them with:
//
//	go test -run '^$' -bench 'Postgres|Raw|Paired' -benchtime 1s -count 3 ./store/postgres/
//
// On a busy machine the server's load drifts more between two benchmarks
// than the Store costs; BenchmarkPaired, which interleaves the two, gives the
// steadier ratio.
// The operations the benchmarks time, each as a function of the operation's
// index i: a Claim+Complete of a new key and a replay of a preloaded
// completed key, through the Store and as the Store's own statements run raw.

var benchResp = []byte(`{"id":42}`)

// newPrefix returns a key prefix unique to one benchmark run.
func newPrefix(kind string) string {
	return kind + "-" + strconv.FormatInt(bench.run.Add(1), 10) + "-"
}

func storeClaimComplete(s *Store, prefix string) func(i int) error {
	return func(i int) error {
		ctx := context.Background()
		key, tok := prefix+strconv.Itoa(i), store.NewToken()
		c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		if err != nil {
			return err
		}
		if c.Outcome != store.Acquired {
			return fmt.Errorf("claim %s: %v", key, c.Outcome)
		}
		return s.Complete(ctx, key, tok, benchResp, time.Hour)
	}
}

func storeReplay(s *Store) func(i int) error {
	return func(i int) error {
		c, err := s.Claim(context.Background(), "pre-"+strconv.Itoa(i%benchRows), "fp", store.NewToken(), time.Minute)
		if err == nil && c.Outcome != store.Completed {
			err = fmt.Errorf("replay: %v", c.Outcome)
		}
		return err
	}
}

// The raw side runs the least SQL that does the work, on the same pool and
// table: a plain INSERT … ON CONFLICT DO NOTHING for a new key (no row
// returned, no lapsed-lease takeover) then the Store's token-checked UPDATE,
// and one SELECT of the row for a replay.

func rawInsert(s *Store) string {
	return `INSERT INTO ` + s.Table() + ` (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval) ON CONFLICT (key) DO NOTHING`
}

func rawSelect(s *Store) string {
	return `SELECT fingerprint, token, status, response, expires_at FROM ` + s.Table() + ` WHERE key = $1`
}

func rawClaimComplete(s *Store, prefix string) func(i int) error {
	retention, lease := interval(time.Hour), interval(time.Minute)
	insert := rawInsert(s)
	return func(i int) error {
		ctx := context.Background()
		key, tok := prefix+strconv.Itoa(i), store.NewToken()
		tag, err := s.db.Exec(ctx, insert, key, "fp", string(tok), lease)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("raw claim %s: not inserted", key)
		}
		tag, err = s.db.Exec(ctx, s.sql.complete, key, string(tok), benchResp, retention)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("raw complete %s: %d rows", key, tag.RowsAffected())
		}
		return err
	}
}

func rawReplay(s *Store) func(i int) error {
	q := rawSelect(s)
	return func(i int) error {
		_ = store.NewToken() // the token every claim makes, as the Store's caller does
		var r row
		err := s.db.QueryRow(context.Background(), q, "pre-"+strconv.Itoa(i%benchRows)).
			Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt)
		if err == nil && r.status != statusCompleted {
			err = fmt.Errorf("raw replay: status %d", r.status)
		}
		return err
	}
}

func BenchmarkPostgres(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			runWorkers(b, w, storeClaimComplete(s, newPrefix("new")))
		})
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			runWorkers(b, w, storeReplay(s))
		})
	}
}

func BenchmarkRaw(b *testing.B) {
	ctx := context.Background()
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			runWorkers(b, w, rawClaimComplete(s, newPrefix("raw")))
		})
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			runWorkers(b, w, rawReplay(s))
		})
		// The one-statement claim other libraries use: a replay through
		// ON CONFLICT DO UPDATE, which writes a row version (and WAL, and a
		// commit flush) every time. For the replay ratio, not a target.
		b.Run(fmt.Sprintf("ReplayDoUpdate/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			q := `INSERT INTO ` + s.Table() + ` AS t (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval)
ON CONFLICT (key) DO UPDATE SET token = CASE WHEN t.expires_at <= clock_timestamp() THEN EXCLUDED.token ELSE t.token END
RETURNING t.fingerprint, t.token, t.status, t.response, t.expires_at`
			var iv pgtype.Interval = interval(time.Minute)
			runWorkers(b, w, func(i int) error {
				var (
					fp, token string
					status    int16
					response  []byte
					expires   time.Time
				)
				return s.db.QueryRow(ctx, q, "pre-"+strconv.Itoa(i%benchRows), "fp", string(store.NewToken()), iv).
					Scan(&fp, &token, &status, &response, &expires)
			})
		})
	}
}

// pairedPhase is how many operations each worker runs in one phase of
// runPaired.
const pairedPhase = 16

// runPaired runs b.N operations over exactly workers goroutines, the
// Store's and raw's in alternating phases of pairedPhase operations per
// worker (internal/pairbench, which says why phases and not operation by
// operation). It reports each side's wall time per operation (with workers
// callers; at one worker, the mean latency) and the Store's throughput
// relative to raw (raw time per operation / Store time per operation).
func runPaired(b *testing.B, workers int, storeOp, rawOp func(i int) error) {
	b.Helper()
	runPhases(b, workers, workers*pairedPhase, storeOp, rawOp)
}

// runPhases is runPaired with phases of phase operations in all.
func runPhases(b *testing.B, workers, phase int, storeOp, rawOp func(i int) error) {
	b.Helper()
	st, raw := pairbench.Run(b, b.N, workers, phase, storeOp, rawOp)
	if st.N == 0 || raw.N == 0 {
		return
	}
	storePer, rawPer := float64(st.PerOp()), float64(raw.PerOp())
	b.ReportMetric(storePer*float64(workers)/1e3, "store-µs/op")
	b.ReportMetric(rawPer*float64(workers)/1e3, "raw-µs/op")
	b.ReportMetric(rawPer/storePer, "store/raw")
}

// BenchmarkPaired interleaves the Store's operations with the same raw
// statements in one run and reports the Store's throughput relative to raw
// (the store/raw metric; the target is at least 0.9).
func BenchmarkPaired(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			prefix := newPrefix("pair")
			b0, c0 := batchStats(s)
			runPaired(b, w, storeClaimComplete(s, prefix+"s"), rawClaimComplete(s, prefix+"r"))
			if b1, c1 := batchStats(s); b1 > b0 {
				b.ReportMetric(float64(c1-c0)/float64(b1-b0), "calls/batch")
				b.ReportMetric(float64(c1-c0)/float64(b.N), "batched/op")
			}
		})
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			runPaired(b, w, storeReplay(s), rawReplay(s))
		})
		// ClaimComplete through a Store with WithCoalescing(true), against
		// the same raw statements, one per operation.
		b.Run(fmt.Sprintf("Coalesced/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			prefix := newPrefix("coal")
			b0, c0 := batchStats(bench.coalesced)
			runPaired(b, w, storeClaimComplete(bench.coalesced, prefix+"s"), rawClaimComplete(s, prefix+"r"))
			if b1, c1 := batchStats(bench.coalesced); b1 > b0 {
				b.ReportMetric(float64(c1-c0)/float64(b1-b0), "calls/batch")
				b.ReportMetric(float64(c1-c0)/float64(b.N), "batched/op")
			}
		})
		// Coalesced with phases of one operation per worker: each phase
		// of the Store is one round of concurrent calls (a batch or a
		// few), and raw's round of single statements follows it at once,
		// so both sides meet the same moment's load and neither gets a
		// run of warm phases.
		b.Run(fmt.Sprintf("CoalescedAlternate/workers=%d", w), func(b *testing.B) {
			s := benchStore(b)
			prefix := newPrefix("calt")
			b0, c0 := batchStats(bench.coalesced)
			runPhases(b, w, w, storeClaimComplete(bench.coalesced, prefix+"s"), rawClaimComplete(s, prefix+"r"))
			if b1, c1 := batchStats(bench.coalesced); b1 > b0 {
				b.ReportMetric(float64(c1-c0)/float64(b1-b0), "calls/batch")
				b.ReportMetric(float64(c1-c0)/float64(b.N), "batched/op")
			}
		})
	}
}

// batchStats returns how many batches the Store's batchers ran and how many
// calls they held, both kinds together.
func batchStats(s *Store) (batches, calls int64) {
	if s.batch == nil {
		return 0, 0
	}
	b1, c1 := s.batch.claims.Stats()
	b2, c2 := s.batch.completes.Stats()
	return b1 + b2, c1 + c2
}
