package httpidem_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/sqlite"
)

// conformanceMaxBody is the fingerprint limit the conformance endpoint
// runs with: small, so that the large-body rules stay cheap.
const conformanceMaxBody = 64 << 10

// conformanceMiddleware is the one place the conformance tests build the
// middleware. wait > 0 lets duplicates in flight wait and replay; tx picks
// transactional mode.
//
// The lease is 2 s because today's httpidem sends the lease's remainder as
// a 409's Retry-After, and httpidemtest wants at most 2 s; once the engine
// sends its short hint the lease can go back to the default.
func conformanceMiddleware(st store.Store, wait time.Duration, tx bool) (func(http.Handler) http.Handler, error) {
	opts := []httpidem.Option{
		httpidem.WithScope(func(r *http.Request) ([]string, error) { return []string{r.Header.Get("X-Tenant")}, nil }),
		httpidem.WithFingerprinter(keyer.NewFingerprinter(keyer.WithCanonicalJSON(), keyer.WithMaxBody(conformanceMaxBody))),
		httpidem.WithLease(2 * time.Second),
		httpidem.WithWait(wait),
	}
	if tx {
		opts = append(opts, httpidem.WithTransactions())
	}
	return httpidem.New(st, opts...)
}

// opener opens a store on the conformance endpoint's data, and returns its
// close function.
type opener func() (store.Store, func(), error)

// conformanceEndpoint is POST /payments behind the middleware. Restart
// closes the store and the middleware and builds both again on the same
// data, as a restarted process would; the effects (payments at a provider)
// are counted outside it.
type conformanceEndpoint struct {
	ctl     httpidemtest.Control
	effects atomic.Int64
	inner   http.Handler
	open    opener
	wait    time.Duration
	tx      bool
	current atomic.Pointer[http.Handler]
	mu      sync.Mutex
	closeSt func()
}

func newConformanceEndpoint(t *testing.T, open opener, wait time.Duration, tx bool) *conformanceEndpoint {
	t.Helper()
	p := &conformanceEndpoint{open: open, wait: wait, tx: tx}
	p.inner = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount int `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if status := p.ctl.Enter(r.Context()); status != 0 {
			http.Error(w, "failing on purpose", status)
			return
		}
		id := p.effects.Add(1)
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"amount":%d}`+"\n", id, req.Amount)
	})
	require.NoError(t, p.build())
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.closeSt()
	})
	return p
}

// build opens the store and the middleware and serves them from now on.
func (p *conformanceEndpoint) build() error {
	st, closeSt, err := p.open()
	if err != nil {
		return err
	}
	mw, err := conformanceMiddleware(st, p.wait, p.tx)
	if err != nil {
		closeSt()
		return err
	}
	h := mw(p.inner)
	p.mu.Lock()
	old := p.closeSt
	p.closeSt = closeSt
	p.mu.Unlock()
	p.current.Store(&h)
	if old != nil {
		old()
	}
	return nil
}

func (p *conformanceEndpoint) target(restart bool) httpidemtest.Target {
	tg := httpidemtest.Target{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			(*p.current.Load()).ServeHTTP(w, r)
		}),
		Path:      "/payments",
		Body:      func() []byte { return []byte(`{"amount":1990}`) },
		OtherBody: func() []byte { return []byte(`{"amount":5}`) },
		Count:     func(context.Context) (int, error) { return int(p.effects.Load()), nil },
		Hold:      p.ctl.Hold,
		Fail:      p.ctl.Fail,
		MaxBody:   conformanceMaxBody,
		Scopes:    []http.Header{{"X-Tenant": {"alice"}}, {"X-Tenant": {"bob"}}},
	}
	if restart {
		tg.Restart = func(context.Context) error { return p.build() }
	}
	return tg
}

// conformanceStore opens the data of one kind of store; the opener it
// returns opens a store on that data, again after a restart.
type conformanceStore struct {
	name    string
	env     string // the variable the store needs, if any
	tx      bool
	durable bool // the data survives a restart
	data    func(t *testing.T) opener
}

func conformanceStores() []conformanceStore {
	return []conformanceStore{
		{name: "memory", data: func(t *testing.T) opener {
			st, err := memory.New()
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return func() (store.Store, func(), error) { return st, func() {}, nil }
		}},
		{name: "sqlite", tx: true, durable: true, data: func(t *testing.T) opener {
			path := filepath.Join(t.TempDir(), "idem.db")
			return func() (store.Store, func(), error) {
				st, err := sqlite.Open(path)
				if err != nil {
					return nil, nil, err
				}
				if err := st.Migrate(context.Background()); err != nil {
					st.Close()
					return nil, nil, err
				}
				return st, func() { st.Close() }, nil
			}
		}},
		{name: "postgres", env: "IDEMKIT_POSTGRES_URL", tx: true, durable: true, data: func(t *testing.T) opener {
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
		}},
		{name: "redis", env: "IDEMKIT_REDIS_ADDR", durable: true, data: func(t *testing.T) opener {
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
		}},
	}
}

// TestConformance runs httpidemtest on the middleware over memory, SQLite,
// PostgreSQL and Redis: lease mode answering 409 to duplicates in flight,
// lease mode waiting for them, and transactional mode on the SQL stores.
// The restart rule runs where the data outlives the process.
func TestConformance(t *testing.T) {
	for _, cs := range conformanceStores() {
		waits := []time.Duration{0, 5 * time.Second}
		if cs.tx {
			waits = []time.Duration{0} // duplicates wait on the database row anyway
		}
		for _, wait := range waits {
			name := cs.name
			if wait > 0 {
				name += "/wait"
			}
			t.Run(name, func(t *testing.T) {
				if cs.env != "" && os.Getenv(cs.env) == "" && !testenv.InCI() {
					t.Skip("needs " + cs.env)
				}
				p := newConformanceEndpoint(t, cs.data(t), wait, cs.tx)
				httpidemtest.Run(t, p.target(cs.durable))
			})
		}
	}
}
