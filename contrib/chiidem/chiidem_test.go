package chiidem_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/internal/frameworktest"
	"github.com/idemkit/idemkit/store"
)

// The payments effect, the modes and the client come from
// internal/frameworktest, shared with the other framework integrations.
type (
	payments = frameworktest.Payments
	mode     = frameworktest.Mode
	result   = frameworktest.Result
)

var modes = frameworktest.Modes

func server(t *testing.T, m mode, st store.Store, p *payments) *httptest.Server {
	t.Helper()
	mw := frameworktest.Middleware(t, m, st,
		httpidem.WithScope(func(r *http.Request) ([]string, error) {
			return []string{r.Header.Get("X-User")}, nil
		}))
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
		id, err := p.Create(r.Context(), account, req.Amount)
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

func post(t *testing.T, url, user, key, body string) result {
	t.Helper()
	return frameworktest.Post(t, url, key, body, "X-User", user)
}

func TestTenParallelOnePayment(t *testing.T) {
	for _, m := range modes {
		t.Run(m.Name, func(t *testing.T) {
			st, p := m.Open(t)
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
				require.Equal(t, http.StatusCreated, r.Status, r.Body)
				assert.Equal(t, `{"id":1,"account":"acc-7","amount":1990}`, r.Body, "chi's URL parameter is read inside the middleware")
				if r.Replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, p.Count(t))

			assert.Equal(t, http.StatusUnprocessableEntity, post(t, url, "alice", key, `{"amount":5}`).Status)
			assert.Equal(t, http.StatusUnprocessableEntity, post(t, srv.URL+"/accounts/acc-8/payments", "alice", key, `{"amount":1990}`).Status,
				"another path is another request")
			// Another user's same key is another operation (WithScope).
			bob := post(t, url, "bob", key, `{"amount":1990}`)
			assert.Equal(t, http.StatusCreated, bob.Status)
			assert.False(t, bob.Replayed)
			assert.Equal(t, 2, p.Count(t))
		})
	}
}
