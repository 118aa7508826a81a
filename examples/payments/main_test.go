package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testenv"
)

// storeCase is one store the demo runs on. cfg returns an isolated
// configuration (its own file, tables or key prefix) with cleanup
// registered.
type storeCase struct {
	name string
	tx   bool // transactional mode (SQL stores)
	cfg  func(t *testing.T) config
}

func storeCases() []storeCase {
	return []storeCase{
		{"sqlite", true, func(t *testing.T) config {
			c := defaultConfig()
			c.Store, c.DB = "sqlite", filepath.Join(t.TempDir(), "payments.db")
			return c
		}},
		{"memory", false, func(t *testing.T) config {
			c := defaultConfig()
			c.Store = "memory"
			return c
		}},
		{"postgres", true, func(t *testing.T) config {
			c := defaultConfig()
			c.Store, c.PostgresURL = "postgres", testenv.PostgresURL(t)
			suffix := strings.ToLower(rand.Text()[:10])
			c.PaymentsTable, c.KeysTable = "payments_demo_"+suffix, "idemkit_demo_"+suffix
			t.Cleanup(func() {
				pool, err := pgxpool.New(context.Background(), c.PostgresURL)
				if err != nil {
					t.Errorf("cleanup: %v", err)
					return
				}
				defer pool.Close()
				_, err = pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+c.PaymentsTable+`", "`+c.KeysTable+`"`)
				assert.NoError(t, err, "cleanup")
			})
			return c
		}},
		{"redis", false, func(t *testing.T) config {
			c := defaultConfig()
			c.Store, c.RedisAddr = "redis", testenv.RedisAddr(t)
			c.RedisPrefix = "payments-demo-test:" + rand.Text()[:10] + ":"
			t.Cleanup(func() {
				client := goredis.NewClient(&goredis.Options{Addr: c.RedisAddr})
				defer client.Close()
				ctx := context.Background()
				iter := client.Scan(ctx, 0, c.RedisPrefix+"*", 100).Iterator()
				for iter.Next(ctx) {
					client.Del(ctx, iter.Val())
				}
				assert.NoError(t, iter.Err(), "cleanup")
			})
			return c
		}},
		mysqlStoreCase(),
	}
}

// demo is one running demo server.
type demo struct {
	t   *testing.T
	app *app
	srv *httptest.Server
}

func startDemo(t *testing.T, c config) *demo {
	t.Helper()
	a, err := open(t.Context(), c, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(a.routes())
	t.Cleanup(func() {
		srv.Close()
		a.close()
	})
	return &demo{t: t, app: a, srv: srv}
}

type result struct {
	status   int
	header   http.Header
	body     string
	payment  payment
	replayed bool
}

// post sends POST /payments with the body and, unless key is "", the key.
func (d *demo) post(key, body string) result {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.srv.URL+"/payments", strings.NewReader(body))
	require.NoError(d.t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := d.srv.Client().Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	r := result{status: resp.StatusCode, header: resp.Header, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if r.status == http.StatusCreated {
		require.NoError(d.t, json.Unmarshal(b, &r.payment), "body %s", b)
	}
	return r
}

func (d *demo) count() int {
	d.t.Helper()
	resp, err := d.srv.Client().Get(d.srv.URL + "/payments")
	require.NoError(d.t, err)
	defer resp.Body.Close()
	require.Equal(d.t, http.StatusOK, resp.StatusCode)
	var ps []payment
	require.NoError(d.t, json.NewDecoder(resp.Body).Decode(&ps))
	return len(ps)
}

func newKey() string { return rand.Text() }

// TestDemo runs the seeds' checks on every available store.
func TestDemo(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Run("TenParallelOnePayment", func(t *testing.T) {
				d := startDemo(t, sc.cfg(t))
				key := newKey()
				results := make([]result, 10)
				var wg sync.WaitGroup
				for i := range results {
					wg.Go(func() { results[i] = d.post(key, `{"amount":1990}`) })
				}
				wg.Wait()
				replays := 0
				for _, r := range results {
					require.Equal(t, http.StatusCreated, r.status, "body %s", r.body)
					assert.Equal(t, results[0].payment, r.payment, "every response names the same payment")
					if r.replayed {
						replays++
					}
				}
				assert.Equal(t, 9, replays, "one real response, nine replays")
				assert.Equal(t, payment{ID: results[0].payment.ID, Amount: 1990}, results[0].payment)
				assert.Equal(t, 1, d.count(), "one payment")

				// Same key, different body: 422, and still one payment.
				r := d.post(key, `{"amount":9999}`)
				assert.Equal(t, http.StatusUnprocessableEntity, r.status)
				assert.Equal(t, httpidem.ProblemContentType, r.header.Get("Content-Type"))
				// Same key, same JSON spelled differently: a replay.
				r = d.post(key, `{ "amount": 1990 }`)
				assert.Equal(t, http.StatusCreated, r.status)
				assert.True(t, r.replayed)
				assert.Equal(t, 1, d.count())
			})
			t.Run("NoKey400", func(t *testing.T) {
				d := startDemo(t, sc.cfg(t))
				r := d.post("", `{"amount":1990}`)
				assert.Equal(t, http.StatusBadRequest, r.status)
				assert.Contains(t, r.body, "idempotency-key-missing")
				assert.Equal(t, 0, d.count())
			})
			t.Run("ReleaseAfter5xxThenRetry", func(t *testing.T) {
				d := startDemo(t, sc.cfg(t))
				var mu sync.Mutex
				fail := true
				d.app.beforeCreate = func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					if fail {
						fail = false
						return errors.New("gateway timeout")
					}
					return nil
				}
				key := newKey()
				r := d.post(key, `{"amount":1990}`)
				require.Equal(t, http.StatusInternalServerError, r.status)
				assert.False(t, r.replayed)
				assert.Equal(t, 0, d.count())
				r = d.post(key, `{"amount":1990}`)
				require.Equal(t, http.StatusCreated, r.status, "the 500 released the key: the retry ran")
				assert.False(t, r.replayed)
				again := d.post(key, `{"amount":1990}`)
				require.Equal(t, http.StatusCreated, again.status)
				assert.True(t, again.replayed)
				assert.Equal(t, r.payment, again.payment)
				assert.Equal(t, 1, d.count())
			})
			t.Run("InFlight", func(t *testing.T) {
				if sc.tx {
					testInFlightTx(t, sc)
				} else {
					testInFlightLease(t, sc)
				}
			})
		})
	}
}

// holdFirst makes the first payment wait until release is closed, and
// reports on entered when it is held.
func holdFirst(d *demo) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.app.beforeCreate = func(ctx context.Context) error {
		held := false
		once.Do(func() { held = true })
		if held {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	return entered, release
}

// testInFlightLease: with leases, a duplicate of a request in flight gets
// 409 with Retry-After, or, with a wait, the first request's answer.
func testInFlightLease(t *testing.T, sc storeCase) {
	t.Run("Conflict409", func(t *testing.T) {
		c := sc.cfg(t)
		c.Wait = 0
		d := startDemo(t, c)
		entered, release := holdFirst(d)
		key := newKey()
		first := make(chan result, 1)
		go func() { first <- d.post(key, `{"amount":1990}`) }()
		<-entered
		r := d.post(key, `{"amount":1990}`)
		assert.Equal(t, http.StatusConflict, r.status)
		assert.NotEmpty(t, r.header.Get("Retry-After"))
		assert.Contains(t, r.body, "idempotency-key-in-progress")
		close(release)
		require.Equal(t, http.StatusCreated, (<-first).status)
		assert.Equal(t, 1, d.count())
	})
	t.Run("WaitThenReplay", func(t *testing.T) {
		c := sc.cfg(t)
		waiting := make(chan struct{}, 1)
		c.tracer = onEvent(func(e idem.Event) {
			if e.Kind == idem.Waiting {
				waiting <- struct{}{}
			}
		})
		d := startDemo(t, c)
		entered, release := holdFirst(d)
		key := newKey()
		first := make(chan result, 1)
		go func() { first <- d.post(key, `{"amount":1990}`) }()
		<-entered
		second := make(chan result, 1)
		go func() { second <- d.post(key, `{"amount":1990}`) }()
		<-waiting // the duplicate found the key in flight and waits
		close(release)
		f, s := <-first, <-second
		require.Equal(t, http.StatusCreated, f.status)
		require.Equal(t, http.StatusCreated, s.status)
		assert.True(t, s.replayed)
		assert.Equal(t, f.payment, s.payment)
		assert.Equal(t, 1, d.count())
	})
}

// testInFlightTx: in a transaction a duplicate waits on the database until
// the first commits, then replays its answer.
func testInFlightTx(t *testing.T, sc storeCase) {
	d := startDemo(t, sc.cfg(t))
	entered, release := holdFirst(d)
	key := newKey()
	first := make(chan result, 1)
	go func() { first <- d.post(key, `{"amount":1990}`) }()
	<-entered
	second := make(chan result, 1)
	go func() { second <- d.post(key, `{"amount":1990}`) }()
	// The second request blocks on the first's transaction; give it time to
	// get there (the real clock is the subject here), then let the first
	// commit. If it arrived later it replays all the same.
	time.Sleep(100 * time.Millisecond)
	close(release)
	f, s := <-first, <-second
	require.Equal(t, http.StatusCreated, f.status, f.body)
	require.Equal(t, http.StatusCreated, s.status, s.body)
	assert.True(t, s.replayed)
	assert.Equal(t, f.payment, s.payment)
	assert.Equal(t, 1, d.count())
}

func TestUnknownStore(t *testing.T) {
	c := defaultConfig()
	c.Store = "mongo"
	_, err := open(t.Context(), c, slog.New(slog.DiscardHandler))
	assert.ErrorContains(t, err, `unknown -store "mongo"`)
}

func TestScopeByBearer(t *testing.T) {
	d := startDemo(t, storeCases()[1].cfg(t)) // memory
	key := newKey()
	send := func(auth string) result {
		req, err := http.NewRequest(http.MethodPost, d.srv.URL+"/payments", strings.NewReader(`{"amount":1990}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", auth)
		resp, err := d.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return result{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	}
	assert.Equal(t, result{status: 201}, send("Bearer alice"))
	assert.Equal(t, result{status: 201}, send("Bearer bob"), "bob's key is not alice's")
	assert.Equal(t, result{status: 201, replayed: true}, send("Bearer alice"))
	assert.Equal(t, http.StatusUnauthorized, send("Basic xyz").status)
	assert.Equal(t, 2, d.count())
}

// onEvent turns a func into a tracer that sees every engine event.
type onEvent func(idem.Event)

func (onEvent) TraceRunStart(ctx context.Context, _ idem.RunStart) context.Context { return ctx }
func (onEvent) TraceRunEnd(context.Context, idem.RunEnd)                           {}
func (f onEvent) TraceEvent(_ context.Context, e idem.Event)                       { f(e) }
