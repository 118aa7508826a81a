package seal_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/seal"
	"github.com/idemkit/idemkit/storetest"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testKeys returns a LocalKeys with one key for the default scope.
func testKeys(t testing.TB) *seal.LocalKeys {
	t.Helper()
	k := seal.NewLocalKeys()
	if err := k.Add("", "k1", seal.NewSecret()); err != nil {
		t.Fatal(err)
	}
	return k
}

func mustSeal(t testing.TB, inner store.Store, keys seal.KeyProvider, opts ...seal.Option) seal.Store {
	t.Helper()
	s, err := seal.New(inner, keys, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMemory(t testing.TB, clock func() time.Time) *memory.Store {
	t.Helper()
	m, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// harness returns the suite's harness for sealed stores made by newStore,
// which declares the sealed store's shorter fingerprint limit.
func harness(newStore func(t *testing.T) storetest.Subject) storetest.Harness {
	return storetest.Harness{New: newStore, MaxFingerprintLen: seal.MaxFingerprintLen}
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) storetest.Subject {
		clock := storetest.NewManualClock(start)
		return storetest.Subject{Store: mustSeal(t, newMemory(t, clock.Now), testKeys(t)), Clock: clock}
	}))
}

func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) storetest.Subject {
		mr := miniredis.RunT(t)
		c := goredis.NewClient(&goredis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { c.Close() })
		clock := testredis.NewMiniClock(mr, start)
		r, err := redis.New(c, redis.WithClock(clock.Now), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{Store: mustSeal(t, r, testKeys(t)), Clock: clock}
	}))
}

// realRedis returns a client of the Redis at IDEMKIT_REDIS_ADDR (skipping
// without it, failing under CI), closed when t ends.
func realRedis(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", c.Options().Addr, err)
	}
	return c
}

// newRedis returns a Redis store under a prefix of t's own, deleted when t ends.
func newRedis(t testing.TB, c goredis.UniversalClient) *redis.Store {
	t.Helper()
	r, err := redis.New(c, redis.WithPrefix(testredis.Prefix(t, c, "idemkit-seal-test:")), redis.WithPersistenceCheck(false))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConformanceRedis(t *testing.T) {
	c := realRedis(t)
	h := harness(func(t *testing.T) storetest.Subject {
		return storetest.Subject{Store: mustSeal(t, newRedis(t, c), testKeys(t))}
	})
	h.ShortLease = 200 * time.Millisecond
	storetest.Run(t, h)
}

var pg struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// testPool returns a pool of the PostgreSQL at IDEMKIT_POSTGRES_URL
// (skipping without it, failing under CI), shared by the package's tests.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresURL(t)
	pg.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			pg.err = err
			return
		}
		cfg.MaxConns = 16
		pg.pool, pg.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	return pg.pool
}

// uniqueTable returns a table name of t's own, dropped when t ends.
func uniqueTable(t testing.TB, pool *pgxpool.Pool, prefix string) string {
	t.Helper()
	name := prefix + strings.ToLower(rand.Text()[:16])
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop table %s: %v", name, err)
		}
	})
	return name
}

// newPostgres returns a migrated PostgreSQL store on a table of t's own.
func newPostgres(t testing.TB, pool *pgxpool.Pool) *postgres.Store {
	t.Helper()
	s, err := postgres.New(pool, postgres.WithTable(uniqueTable(t, pool, "idemkit_seal_")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformancePostgres runs the suite, the Transactor cases with the
// caller's own writes included, through the sealed store's InTx.
func TestConformancePostgres(t *testing.T) {
	pool := testPool(t)
	storetest.Run(t, harness(func(t *testing.T) storetest.Subject {
		fx := pgx.Identifier{uniqueTable(t, pool, "idemkit_seal_fx_")}.Sanitize()
		if _, err := pool.Exec(context.Background(), "CREATE TABLE "+fx+" (key text NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{
			Store: mustSeal(t, newPostgres(t, pool), testKeys(t)),
			Effect: func(ctx context.Context, key string) error {
				tx, ok := postgres.TxFrom(ctx)
				if !ok {
					return errors.New("effect: the context carries no transaction")
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+fx+" (key) VALUES ($1)", key)
				return err
			},
			CountEffects: func(ctx context.Context, key string) (n int, err error) {
				err = pool.QueryRow(ctx, "SELECT count(*) FROM "+fx+" WHERE key = $1", key).Scan(&n)
				return n, err
			},
		}
	}))
}
