package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/cache"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/storetest"
)

// benchKeys is how many completed keys the replay benchmarks cycle over.
const benchKeys = 1024

// benchBackends are the stores the paired benchmarks put the cache in front of.
var benchBackends = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"redis", func(b *testing.B) store.Store { return newRedis(b, realRedis(b)) }},
	{"postgres", benchPostgres},
}

// benchPostgres returns a PostgreSQL store on a fresh table, dropped when b ends.
func benchPostgres(b *testing.B) store.Store {
	b.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	table := "idemkit_cache_bench_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s, err := postgres.New(pool, postgres.WithTable(table))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
	})
	return s
}

// BenchmarkPaired measures replays of completed keys through the cache
// against the same replays straight to the store, at 1 and 16 workers, in
// alternating phases (internal/pairbench) so both meet the same load. It
// reports cached-ops/s, uncached-ops/s and cached/raw, their ratio (raw is
// the store without the cache; above 1 the cache is faster).
//
//	go test -run '^$' -bench '^BenchmarkPaired$' -benchtime 20000x ./store/cache/
func BenchmarkPaired(b *testing.B) {
	for _, be := range benchBackends {
		for _, w := range []int{1, 16} {
			b.Run(fmt.Sprintf("Replay/%s/workers=%d", be.name, w), func(b *testing.B) {
				inner := be.open(b)
				c := mustCache(b, inner, cache.WithMargin(cache.DefaultMargin))
				keys := completeKeys(b, inner, benchKeys, storetest.BenchResponse)
				replay := func(s store.Store) func(i int) error {
					return func(i int) error {
						k := keys[i%len(keys)]
						cl, err := s.Claim(context.Background(), k, "fp", store.NewToken(), time.Minute)
						if err == nil && (cl.Outcome != store.Completed || !bytes.Equal(cl.Record.Response, storetest.BenchResponse)) {
							err = fmt.Errorf("replay of %s: %v", k, cl.Outcome)
						}
						return err
					}
				}
				for i := range keys { // warm the cache: every key filled once
					if err := replay(c)(i); err != nil {
						b.Fatal(err)
					}
				}
				cached, raw := pairbench.Run(b, b.N, w, 256, replay(c), replay(inner))
				if cached.N == 0 || raw.N == 0 {
					return
				}
				cr, rr := float64(cached.N)/cached.Elapsed.Seconds(), float64(raw.N)/raw.Elapsed.Seconds()
				b.ReportMetric(cr, "cached-ops/s")
				b.ReportMetric(rr, "uncached-ops/s")
				b.ReportMetric(cr/rr, "cached/raw")
			})
		}
	}
}

// completeKeys completes n fresh keys on s with resp and returns them.
func completeKeys(b *testing.B, s store.Store, n int, resp []byte) []string {
	b.Helper()
	prefix := "bench-" + string(store.NewToken())[:10] + "-"
	keys := make([]string, n)
	tok := store.NewToken()
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if _, err := s.Claim(context.Background(), keys[i], "fp", tok, time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(context.Background(), keys[i], tok, resp, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	return keys
}
