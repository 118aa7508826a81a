package chiidem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

// payments is the effect: rows in SQLite written in the middleware's
// transaction (tx mode), or a counter (lease mode).
type payments struct {
	mu sync.Mutex
	n  int
	db *sql.DB // tx mode
}

func (p *payments) create(ctx context.Context, account string, amount int) (int64, error) {
	if p.db != nil {
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return 0, errors.New("not in the idempotency transaction")
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO payments (account, amount) VALUES (?, ?)`, account, amount)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return int64(p.n), nil
}

func (p *payments) count(t *testing.T) int {
	t.Helper()
	if p.db != nil {
		var n int
		require.NoError(t, p.db.QueryRow(`SELECT count(*) FROM payments`).Scan(&n))
		return n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

type mode struct {
	name string
	open func(t *testing.T) (store.Store, *payments)
	opts []httpidem.Option
}

var modes = []mode{
	{"lease/memory", func(t *testing.T) (store.Store, *payments) {
		st, err := memory.New()
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st, &payments{}
	}, nil},
	{"transactional/sqlite", func(t *testing.T) (store.Store, *payments) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		_, err = st.DB().Exec(`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL, amount INTEGER NOT NULL)`)
		require.NoError(t, err)
		return st, &payments{db: st.DB()}
	}, []httpidem.Option{httpidem.WithTransactions()}},
}

func server(t *testing.T, m mode, st store.Store, p *payments) *httptest.Server {
	t.Helper()
	mw, err := httpidem.New(st, append([]httpidem.Option{
		httpidem.WithWait(10 * time.Second),
		httpidem.WithScope(func(r *http.Request) ([]string, error) {
			return []string{r.Header.Get("X-User")}, nil
		}),
	}, m.opts...)...)
	require.NoError(t, err)
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.With(mw).Post("/accounts/{account}/payments", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount int `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
			http.Error(w, "bad amount", http.StatusBadRequest)
			return
		}
		account := chi.URLParam(r, "account")
		id, err := p.create(r.Context(), account, req.Amount)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"account":%q,"amount":%d}`, id, account, req.Amount)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	status   int
	body     string
	replayed bool
}

func post(t *testing.T, url, user, key, body string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-User", user)
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return result{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

func TestTenParallelOnePayment(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st, p := m.open(t)
			srv := server(t, m, st, p)
			url := srv.URL + "/accounts/acc-7/payments"
			key := rand.Text()
			results := make([]result, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = post(t, url, "alice", key, `{"amount":1990}`) })
			}
			wg.Wait()
			replays := 0
			for _, r := range results {
				require.Equal(t, http.StatusCreated, r.status, r.body)
				assert.Equal(t, `{"id":1,"account":"acc-7","amount":1990}`, r.body, "chi's URL parameter is read inside the middleware")
				if r.replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.count(t))

			assert.Equal(t, http.StatusUnprocessableEntity, post(t, url, "alice", key, `{"amount":5}`).status)
			assert.Equal(t, http.StatusUnprocessableEntity, post(t, srv.URL+"/accounts/acc-8/payments", "alice", key, `{"amount":1990}`).status,
				"another path is another request")
			// Another user's same key is another operation (WithScope).
			bob := post(t, url, "bob", key, `{"amount":1990}`)
			assert.Equal(t, http.StatusCreated, bob.status)
			assert.False(t, bob.replayed)
			assert.Equal(t, 2, p.count(t))
		})
	}
}
