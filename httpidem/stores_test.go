package httpidem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/mysql"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/sqlite"
)

// realStore is one backend on a real server (or file), in a table or
// prefix of its own.
type realStore struct {
	name string
	open func(t *testing.T) store.Store
}

func suffix() string { return strings.ToLower(rand.Text()[:10]) }

var realStores = []realStore{
	{"memory", func(t *testing.T) store.Store {
		s, err := memory.New()
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"sqlite", func(t *testing.T) store.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		require.NoError(t, s.Migrate(t.Context()))
		return s
	}},
	{"postgres", func(t *testing.T) store.Store {
		pool, err := pgxpool.New(t.Context(), testenv.PostgresURL(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		table := "httpidem_keys_" + suffix()
		s, err := postgres.New(pool, postgres.WithTable(table))
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+s.Table()) })
		return s
	}},
	{"mysql", func(t *testing.T) store.Store {
		db, err := sql.Open("mysql", testenv.MySQLDSN(t))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		s, err := mysql.New(db, mysql.WithTable("httpidem_keys_"+suffix()))
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+s.Table()) })
		return s
	}},
	{"redis", func(t *testing.T) store.Store {
		c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { c.Close() })
		s, err := redis.New(c, redis.WithPrefix(testredis.Prefix(t, c, "httpidem-test:")))
		require.NoError(t, err)
		return s
	}},
}

// TestDuplicateWaitsOnEveryStore: the same request gets the same answer on
// every store with the engine's defaults. A duplicate sent while a 300 ms
// handler runs waits for it and is replayed about 300 ms after the first
// began, in lease mode (every store) and in transactional mode (the SQL
// stores); with idem.WithWait(0) it gets a 409 whose Retry-After is at most
// MaxRetryAfter, never the lease.
func TestDuplicateWaitsOnEveryStore(t *testing.T) {
	const work = 300 * time.Millisecond
	for _, rs := range realStores {
		t.Run(rs.name, func(t *testing.T) {
			st := rs.open(t)
			modes := []struct {
				name string
				opt  []httpidem.Option
			}{{"lease", nil}}
			if _, ok := st.(store.Transactor); ok {
				modes = append(modes, struct {
					name string
					opt  []httpidem.Option
				}{"transactional", []httpidem.Option{httpidem.WithTransactions()}})
			}
			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					e, err := idem.New(st)
					require.NoError(t, err)
					var runs atomic.Int32
					entered := make(chan struct{}, 1)
					mw, err := httpidem.New(e, m.opt...)
					require.NoError(t, err)
					srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						n := runs.Add(1)
						entered <- struct{}{}
						time.Sleep(work) // the handler's work, on the real clock
						w.WriteHeader(http.StatusCreated)
						fmt.Fprintf(w, `{"run":%d}`, n)
					})))
					t.Cleanup(srv.Close)
					key := "k-" + suffix()
					start := time.Now()
					first := make(chan answer, 1)
					go func() { first <- postKey(t, srv.URL, key) }()
					<-entered
					dups := make([]answer, 4)
					var wg sync.WaitGroup
					for i := range dups {
						wg.Go(func() { dups[i] = postKey(t, srv.URL, key) })
					}
					wg.Wait()
					f := <-first
					require.Equal(t, http.StatusCreated, f.status, f.body)
					for _, d := range dups {
						require.Equal(t, http.StatusCreated, d.status, "a duplicate waits and replays: %s", d.body)
						assert.True(t, d.replayed)
						assert.Equal(t, f.body, d.body)
						assert.GreaterOrEqual(t, d.at.Sub(start), work-20*time.Millisecond)
						assert.Less(t, d.at.Sub(start), work+2*time.Second, "replayed soon after the first finished")
					}
					assert.EqualValues(t, 1, runs.Load())
				})
			}
			t.Run("no wait: 409 with a short Retry-After", func(t *testing.T) {
				e, err := idem.New(st, idem.WithWait(0), idem.WithLease(time.Minute))
				require.NoError(t, err)
				mw, err := httpidem.New(e)
				require.NoError(t, err)
				entered, release := make(chan struct{}), make(chan struct{})
				srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(entered)
					<-release
					w.WriteHeader(http.StatusCreated)
				})))
				t.Cleanup(srv.Close)
				key := "k-" + suffix()
				first := make(chan answer, 1)
				go func() { first <- postKey(t, srv.URL, key) }()
				<-entered
				d := postKey(t, srv.URL, key)
				close(release)
				require.Equal(t, http.StatusConflict, d.status)
				ra, err := strconv.Atoi(d.retryAfter)
				require.NoError(t, err, "Retry-After %q", d.retryAfter)
				assert.LessOrEqual(t, ra, httpidem.MaxRetryAfter, "a short hint, never the minute-long lease")
				assert.GreaterOrEqual(t, ra, 1)
				require.Equal(t, http.StatusCreated, (<-first).status)
			})
		})
	}
}

type answer struct {
	status     int
	body       string
	replayed   bool
	retryAfter string
	at         time.Time
}

func postKey(t *testing.T, url, key string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":1990}`))
	if err != nil {
		t.Error(err)
		return answer{}
	}
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header.Get(httpidem.ReplayedHeader) == "true", resp.Header.Get("Retry-After"), time.Now()}
}
