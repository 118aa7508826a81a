package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The benchmarks compare the Store with raw database/sql running the very
// same statements (prepared, on a pool opened with Open's DSN) on the same
// file in the same run:
//
//	go test -run '^$' -bench 'SQLite|Raw' -benchtime 2000x -count 3 ./store/sqlite/
//
// new:    Claim of a new key + Complete; raw: a plain INSERT + the UPDATE.
// replay: Claim of a completed key; raw: one SELECT of the row.
// g1, g8: one or eight goroutines. Figures are reported as ops/s, and as
// CPU time of the whole process per operation (cpu-µs/op).

var bench struct {
	once sync.Once
	dir  string
	path string
	err  error
	seq  atomic.Int64
}

// benchPreload is how many rows the table holds before the benchmarks run:
// 10,000, or IDEMKIT_BENCH_SQLITE_ROWS (say 1000000, to measure a large
// file; the file is made at the start of the run and deleted at its end).
var benchPreload = func() int {
	if n, err := strconv.Atoi(os.Getenv("IDEMKIT_BENCH_SQLITE_ROWS")); err == nil && n > 0 {
		return n
	}
	return 10000
}()

const (
	benchReplay = 1000 // completed keys the replay benchmarks claim
	benchFP     = "3f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed"
)

var benchResp = []byte(`{"id":123456,"amount":1990,"currency":"EUR","status":"succeeded"}`)

// benchFile returns the database file every benchmark shares, with the table
// preloaded and benchReplay completed keys "replay-N".
func benchFile(b *testing.B) string {
	b.Helper()
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "idemkit-sqlite-bench-")
		if bench.err != nil {
			return
		}
		bench.path = filepath.Join(bench.dir, "bench.db")
		s, err := Open(bench.path)
		if err != nil {
			bench.err = err
			return
		}
		defer s.Close()
		ctx := context.Background()
		if err := s.Migrate(ctx); err != nil {
			bench.err = err
			return
		}
		// The preload in one statement; then the replay keys through the Store.
		_, err = s.DB().ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
INSERT INTO `+quoteIdent(DefaultTable)+` (key, fingerprint, token, status, response, locked_until, expires_at)
SELECT 'preload-' || i, ?2, 'tok-' || i, 2, ?3, 0, ?4 FROM n`, benchPreload, benchFP, benchResp, time.Now().Add(24*time.Hour).UnixMicro())
		if err != nil {
			bench.err = err
			return
		}
		bench.err = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			for i := range benchReplay {
				key := "replay-" + strconv.Itoa(i)
				tok := store.NewToken()
				if _, err := st.Claim(ctx, key, benchFP, tok, time.Hour); err != nil {
					return err
				}
				if err := st.Complete(ctx, key, tok, benchResp, 24*time.Hour); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.path
}

// removeBenchFile is called by TestMain after the run.
func removeBenchFile() {
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
}

// parallel runs op b.N times over g goroutines and reports ops/s.
func parallel(b *testing.B, g int, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, g)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range g {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime returns the CPU time the process has used, user and system. On a
// machine shared with other work, CPU per operation varies far less than
// wall-clock throughput.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func newKey() string {
	return "new-" + strconv.FormatInt(bench.seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func BenchmarkSQLite(b *testing.B) {
	path := benchFile(b)
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("new/g%d", g), func(b *testing.B) {
			parallel(b, g, func(int64) error {
				key, tok := newKey(), store.NewToken()
				c, err := s.Claim(ctx, key, benchFP, tok, time.Minute)
				if err != nil {
					return err
				}
				if c.Outcome != store.Acquired {
					return fmt.Errorf("claim of a new key: %v", c.Outcome)
				}
				return s.Complete(ctx, key, tok, benchResp, time.Hour)
			})
		})
		b.Run(fmt.Sprintf("replay/g%d", g), func(b *testing.B) {
			parallel(b, g, func(i int64) error {
				c, err := s.Claim(ctx, "replay-"+strconv.FormatInt(i%benchReplay, 10), benchFP, store.NewToken(), time.Minute)
				if err != nil {
					return err
				}
				if c.Outcome != store.Completed || len(c.Record.Response) == 0 {
					return fmt.Errorf("replay: %v", c.Outcome)
				}
				return nil
			})
		})
	}
}

// rawDB opens path as Open does (same DSN, same pool size) and prepares on
// it the least SQL that does the work: a plain INSERT for a new key (no
// ON CONFLICT, no lapsed-lease takeover), the Store's token-checked UPDATE
// to complete it, and one SELECT for a replay.
type rawDB struct {
	db                     *sql.DB
	insert, read, complete *sql.Stmt
}

func openRaw(b *testing.B, path string, conns int) *rawDB {
	b.Helper()
	o := defaultOptions()
	db, err := sql.Open("sqlite", dsn(path, false, o))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t := quoteIdent(DefaultTable)
	prep := func(id stmtID) *sql.Stmt {
		st, err := db.Prepare(buildQuery(id, t))
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	insert, err := db.Prepare(`INSERT INTO ` + t + ` (key, fingerprint, token, status, response, locked_until, expires_at)
VALUES (?1, ?2, ?3, 1, NULL, ?4, ?4)`)
	if err != nil {
		b.Fatal(err)
	}
	// The raw replay reads what a hand-written one needs; the Store's read
	// also takes the attempt and fence.
	read, err := db.Prepare(`SELECT fingerprint, token, status, response, locked_until, expires_at FROM ` + t + ` WHERE key = ?1`)
	if err != nil {
		b.Fatal(err)
	}
	return &rawDB{db: db, insert: insert, read: read, complete: prep(stmtComplete)}
}

func (r *rawDB) newKey(ctx context.Context) error {
	key, tok := newKey(), string(store.NewToken())
	now := time.Now().UnixMicro()
	res, err := r.insert.ExecContext(ctx, key, benchFP, tok, now+time.Minute.Microseconds())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("raw claim: %d rows, %v", n, err)
	}
	now = time.Now().UnixMicro()
	res, err = r.complete.ExecContext(ctx, key, tok, benchResp, now+time.Hour.Microseconds(), now)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("raw complete: %d rows, %v", n, err)
	}
	return nil
}

func (r *rawDB) replay(ctx context.Context, i int64) error {
	key := "replay-" + strconv.FormatInt(i%benchReplay, 10)
	_ = store.NewToken() // the token every claim makes, as the Store's caller does
	var (
		fp, token       string
		status          int
		resp            []byte
		until, expireAt int64
	)
	if err := r.read.QueryRowContext(ctx, key).Scan(&fp, &token, &status, &resp, &until, &expireAt); err != nil {
		return err
	}
	if status != statusCompleted || len(resp) == 0 {
		return fmt.Errorf("raw replay: status %d", status)
	}
	return nil
}

func BenchmarkRaw(b *testing.B) {
	path := benchFile(b)
	ctx := context.Background()
	for _, pool := range []int{8, 1} {
		r := openRaw(b, path, pool)
		for _, g := range []int{1, 8} {
			if pool == 1 && g == 1 {
				continue // the same as pool 8 with one goroutine
			}
			suffix := ""
			if pool == 1 {
				suffix = "/pool1"
			}
			b.Run(fmt.Sprintf("new/g%d%s", g, suffix), func(b *testing.B) {
				parallel(b, g, func(int64) error { return r.newKey(ctx) })
			})
			b.Run(fmt.Sprintf("replay/g%d%s", g, suffix), func(b *testing.B) {
				parallel(b, g, func(i int64) error { return r.replay(ctx, i) })
			})
		}
	}
}

// chunk runs op n times over g goroutines and returns the wall time and the
// process's CPU time.
func chunk(g, n int, op func() error) (wall, cpu time.Duration, err error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	cpu0, start := cpuTime(), time.Now()
	for range g {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := op(); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return 0, 0, *p
	}
	return time.Since(start), cpuTime() - cpu0, nil
}

// BenchmarkInterleaved runs the Store and raw database/sql, with 1 and 8
// goroutines, in alternating rounds of 200 operations on the same file (the
// order rotating from round to round), so all four meet the same load from
// the rest of the machine; b.N operations for each. It reports each one's ops/s and the ratios the targets are about:
//
//	go test -run '^$' -bench Interleaved -benchtime 3000x ./store/sqlite/
func BenchmarkInterleaved(b *testing.B) {
	path := benchFile(b)
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	raw := openRaw(b, path, 8)
	ctx := context.Background()
	var replaySeq atomic.Int64
	workloads := []struct {
		name     string
		lib, raw func() error
	}{
		{"new", func() error {
			key, tok := newKey(), store.NewToken()
			c, err := s.Claim(ctx, key, benchFP, tok, time.Minute)
			if err != nil {
				return err
			}
			if c.Outcome != store.Acquired {
				return fmt.Errorf("claim of a new key: %v", c.Outcome)
			}
			return s.Complete(ctx, key, tok, benchResp, time.Hour)
		}, func() error { return raw.newKey(ctx) }},
		{"replay", func() error {
			key := "replay-" + strconv.FormatInt(replaySeq.Add(1)%benchReplay, 10)
			c, err := s.Claim(ctx, key, benchFP, store.NewToken(), time.Minute)
			if err != nil {
				return err
			}
			if c.Outcome != store.Completed {
				return fmt.Errorf("replay: %v", c.Outcome)
			}
			return nil
		}, func() error { return raw.replay(ctx, replaySeq.Add(1)) }},
	}
	const round = 200
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			contestants := []struct {
				name string
				g    int
				op   func() error
			}{
				{"sqlite-g1", 1, w.lib}, {"raw-g1", 1, w.raw}, {"sqlite-g8", 8, w.lib}, {"raw-g8", 8, w.raw},
			}
			spent := make([]time.Duration, len(contestants))
			cpu := make([]time.Duration, len(contestants))
			for r, done := 0, 0; done < b.N; r, done = r+1, done+round {
				n := min(round, b.N-done)
				for j := range contestants {
					i := (r + j) % len(contestants) // rotate, so no one always follows the same
					c := contestants[i]
					d, used, err := chunk(c.g, n, c.op)
					if err != nil {
						b.Fatal(err)
					}
					spent[i] += d
					cpu[i] += used
				}
			}
			rate := make([]float64, len(contestants))
			for i, c := range contestants {
				rate[i] = float64(b.N) / spent[i].Seconds()
				b.ReportMetric(rate[i], c.name+"-ops/s")
				b.ReportMetric(float64(cpu[i].Microseconds())/float64(b.N), c.name+"-cpu-µs/op")
			}
			b.ReportMetric(rate[0]/rate[1], "sqlite/raw-g1")
			b.ReportMetric(rate[2]/rate[0], "sqlite-g8/g1")
			b.ReportMetric(rate[3]/rate[1], "raw-g8/g1")
			b.ReportMetric(rate[2]/rate[3], "sqlite/raw-g8")
		})
	}
}
