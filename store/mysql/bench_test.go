package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// benchRows is how many completed records the benchmark table holds before
// the benchmarks start, so they run on an index of some depth rather than on
// an empty table.
const benchRows = 50_000

var bench struct {
	once sync.Once
	s    *Store
	raw  *rawStmts
	err  error
	run  atomic.Int64 // makes the keys of each benchmark run unique
}

// rawStmts are the Store's own statements, prepared once on the same pool,
// for the raw side of the comparison.
type rawStmts struct{ insert, read, complete *sql.Stmt }

// benchStore returns a Store on a preloaded table shared by all benchmarks
// of this process, on a pool of 16 connections, and the raw statements.
func benchStore(b *testing.B) (*Store, *rawStmts) {
	b.Helper()
	bench.once.Do(func() {
		ctx := context.Background()
		db, err := sql.Open("mysql", testenv.MySQLDSN(b))
		if err != nil {
			bench.err = err
			return
		}
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		s, err := New(db, WithTable(uniqueName("idemkit_my_bench_")))
		if err == nil {
			err = s.Migrate(ctx)
		}
		benchCleanup = func() {
			_ = s.Close()
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.Table())
			_ = db.Close()
		}
		if err != nil {
			bench.err = err
			return
		}
		for i := 0; i < benchRows && err == nil; i += 1000 {
			var sb strings.Builder
			sb.WriteString("INSERT INTO " + s.Table() + " (`key`, fingerprint, token, status, response, expires_at) VALUES ")
			for j := i; j < i+1000; j++ {
				if j > i {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "('pre-%d', 'fp', 'tok-%d', 2, '{\"id\":%d}', UTC_TIMESTAMP(6) + INTERVAL 1 DAY)", j, j, j)
			}
			_, err = db.ExecContext(ctx, sb.String())
		}
		if err == nil {
			_, err = db.ExecContext(ctx, "ANALYZE TABLE "+s.Table())
		}
		raw := &rawStmts{}
		q := buildStatements(s.Table())
		for _, p := range []struct {
			dst **sql.Stmt
			id  stmtID
		}{{&raw.insert, stmtInsert}, {&raw.read, stmtRead}, {&raw.complete, stmtComplete}} {
			if err == nil {
				*p.dst, err = db.PrepareContext(ctx, q[p.id])
			}
		}
		bench.s, bench.raw, bench.err = s, raw, err
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.s, bench.raw
}

// benchCleanup drops the benchmark table and closes its pool; TestMain
// calls it after the benchmarks.
var benchCleanup = func() {}

var benchWorkers = []int{1, 16}

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

// rawClaimComplete runs the Store's INSERT and UPDATE with database/sql
// directly, checking the results as little as a hand-written caller would.
func rawClaimComplete(r *rawStmts, prefix string) func(i int) error {
	lease, retention := micros(time.Minute), micros(time.Hour)
	return func(i int) error {
		ctx := context.Background()
		key, tok := prefix+strconv.Itoa(i), string(store.NewToken())
		res, err := r.insert.ExecContext(ctx, key, "fp", tok, lease)
		if err != nil {
			return err
		}
		if _, err := res.LastInsertId(); err != nil {
			return err
		}
		res, err = r.complete.ExecContext(ctx, benchResp, retention, key, tok)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("raw complete %s: %d rows, %v", key, n, err)
		}
		return nil
	}
}

// rawReplay runs the INSERT, expects the duplicate-key error, and reads the
// row, as Claim does for a completed key.
func rawReplay(r *rawStmts) func(i int) error {
	lease := micros(time.Minute)
	return func(i int) error {
		ctx := context.Background()
		key := "pre-" + strconv.Itoa(i%benchRows)
		_, err := r.insert.ExecContext(ctx, key, "fp", string(store.NewToken()), lease)
		if !serverErr(err, errDupEntry) {
			return fmt.Errorf("raw replay insert: %v", err)
		}
		var (
			cur   row
			nowUS int64
		)
		err = r.read.QueryRowContext(ctx, key).Scan(&cur.fingerprint, &cur.token, &cur.status, &cur.response, &cur.expiresUS, &nowUS)
		if err == nil && cur.status != statusCompleted {
			err = errors.New("raw replay: not completed")
		}
		return err
	}
}

// runPaired runs b.N operations over exactly workers goroutines, alternating
// the Store's operation and the raw one, so both meet the same server load.
// It reports each one's mean latency and the Store's throughput relative to
// raw (raw mean latency / Store mean latency).
func runPaired(b *testing.B, workers int, storeOp, rawOp func(i int) error) {
	b.Helper()
	var next, storeNs, rawNs, storeN, rawN atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				op, ns, n := storeOp, &storeNs, &storeN
				if i%2 == 1 {
					op, ns, n = rawOp, &rawNs, &rawN
				}
				began := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				ns.Add(int64(time.Since(began)))
				n.Add(1)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if storeN.Load() == 0 || rawN.Load() == 0 {
		return
	}
	storeMean := float64(storeNs.Load()) / float64(storeN.Load())
	rawMean := float64(rawNs.Load()) / float64(rawN.Load())
	b.ReportMetric(storeMean/1e3, "store-µs/op")
	b.ReportMetric(rawMean/1e3, "raw-µs/op")
	b.ReportMetric(rawMean/storeMean, "store/raw")
}

// storeInTx claims a new key, and completes it, in one InTx.
func storeInTx(s *Store, prefix string) func(i int) error {
	return func(i int) error {
		key, tok := prefix+strconv.Itoa(i), store.NewToken()
		return s.InTx(context.Background(), func(ctx context.Context, st store.Store) error {
			c, err := st.Claim(ctx, key, "fp", tok, time.Minute)
			if err != nil {
				return err
			}
			if c.Outcome != store.Acquired {
				return fmt.Errorf("claim %s: %v", key, c.Outcome)
			}
			return st.Complete(ctx, key, tok, benchResp, time.Hour)
		})
	}
}

// rawInTx runs the same INSERT and UPDATE in one database/sql transaction.
func rawInTx(db *sql.DB, r *rawStmts, prefix string) func(i int) error {
	lease, retention := micros(time.Minute), micros(time.Hour)
	return func(i int) error {
		ctx := context.Background()
		key, tok := prefix+strconv.Itoa(i), string(store.NewToken())
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.StmtContext(ctx, r.insert).ExecContext(ctx, key, "fp", tok, lease); err != nil {
			return err
		}
		res, err := tx.StmtContext(ctx, r.complete).ExecContext(ctx, benchResp, retention, key, tok)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("raw complete %s: %d rows, %v", key, n, err)
		}
		return tx.Commit()
	}
}

// BenchmarkPaired interleaves the Store's operations with the same
// statements run raw through database/sql in one run, and reports the
// Store's throughput relative to raw (store/raw; the target is at least
// 0.95): Claim+Complete of a new key, a replay, and Claim+Complete in one
// transaction. Run it with:
//
//	go test -run '^$' -bench Paired -benchtime 2000x -count 5 ./store/mysql/
func BenchmarkPaired(b *testing.B) {
	for _, w := range benchWorkers {
		b.Run(fmt.Sprintf("ClaimComplete/workers=%d", w), func(b *testing.B) {
			s, raw := benchStore(b)
			prefix := newPrefix("pair")
			runPaired(b, w, storeClaimComplete(s, prefix+"s"), rawClaimComplete(raw, prefix+"r"))
		})
		b.Run(fmt.Sprintf("Replay/workers=%d", w), func(b *testing.B) {
			s, raw := benchStore(b)
			runPaired(b, w, storeReplay(s), rawReplay(raw))
		})
		b.Run(fmt.Sprintf("InTx/workers=%d", w), func(b *testing.B) {
			s, raw := benchStore(b)
			prefix := newPrefix("tx")
			runPaired(b, w, storeInTx(s, prefix+"s"), rawInTx(s.DB(), raw, prefix+"r"))
		})
	}
}
