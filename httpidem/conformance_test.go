package httpidem_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/httpconformance"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
)

// postgresStore is transactional mode on a PostgreSQL table of the test's
// own, reopened with a new pool on a restart.
var postgresStore = httpconformance.Store{Name: "postgres", Tx: true, Durable: true, Data: func(t *testing.T) httpconformance.Opener {
	url := testenv.PostgresURL(t)
	table := "httpidemtest_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), url)
		if err == nil {
			_, err = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
			pool.Close()
		}
		if err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	return func() (store.Store, func(), error) {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			return nil, nil, err
		}
		st, err := postgres.New(pool, postgres.WithTable(table))
		if err == nil {
			err = st.Migrate(context.Background())
		}
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return st, pool.Close, nil
	}
}}

// redisStore is lease mode on Redis under a prefix of the test's own,
// reopened with a new client on a restart.
var redisStore = httpconformance.Store{Name: "redis", Durable: true, Data: func(t *testing.T) httpconformance.Opener {
	addr := testenv.RedisAddr(t)
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	prefix := testredis.Prefix(t, c, "idemkit-httpidemtest:")
	return func() (store.Store, func(), error) {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		st, err := redis.New(c, redis.WithPrefix(prefix))
		if err != nil {
			_ = c.Close()
			return nil, nil, err
		}
		return st, func() { _ = c.Close() }, nil
	}
}}

// TestConformance runs httpidemtest on the middleware over memory, SQLite,
// PostgreSQL and Redis: lease mode answering 409 to duplicates in flight,
// lease mode waiting for them, and transactional mode on the SQL stores.
// The restart rule runs where the data outlives the process.
func TestConformance(t *testing.T) {
	envs := map[string]string{"postgres": "IDEMKIT_POSTGRES_URL", "redis": "IDEMKIT_REDIS_ADDR"}
	for _, cs := range []httpconformance.Store{httpconformance.Memory, httpconformance.SQLite, postgresStore, redisStore} {
		waits := []time.Duration{0, 5 * time.Second}
		if cs.Tx {
			waits = []time.Duration{0} // duplicates wait on the database row anyway
		}
		for _, wait := range waits {
			name := cs.Name
			if wait > 0 {
				name += "/wait"
			}
			t.Run(name, func(t *testing.T) {
				if env := envs[cs.Name]; env != "" && os.Getenv(env) == "" && !testenv.InCI() {
					t.Skip("needs " + env)
				}
				httpconformance.Run(t, []httpconformance.Store{cs}, wait,
					func(p *httpconformance.Payments, mw func(http.Handler) http.Handler) http.Handler {
						return mw(p.Handler())
					})
			})
		}
	}
}
