package httpidem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// errRolledBack stands for a deadlock: the database rolled the transaction
// back whole, and the store runs it again (store/mysql does, up to 10 times).
var errRolledBack = errors.New("test: the database rolled the transaction back")

// rerunTx is a SQLite store whose InTx runs fn a second time after rolling
// the first attempt back, as a store does after a deadlock.
type rerunTx struct {
	*sqlite.Store
	attempts atomic.Int32
}

func (s *rerunTx) InTx(ctx context.Context, fn func(ctx context.Context, st store.Store) error) error {
	first := true
	for {
		err := s.Store.InTx(ctx, func(ctx context.Context, st store.Store) error {
			s.attempts.Add(1)
			if err := fn(ctx, st); err != nil {
				return err
			}
			if first {
				first = false
				return errRolledBack
			}
			return nil
		})
		if errors.Is(err, errRolledBack) {
			continue
		}
		return err
	}
}

// TestTxRerunReadsTheWholeBody: when the store runs the transaction again,
// the handler reads the request body from the start again (the first attempt
// consumed it); otherwise the committed answer is made from an empty body.
func TestTxRerunReadsTheWholeBody(t *testing.T) {
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "keys.db"))
	require.NoError(t, err)
	t.Cleanup(func() { sq.Close() })
	require.NoError(t, sq.Migrate(t.Context()))
	st := &rerunTx{Store: sq}

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	})
	srv := httptest.NewServer(mustNew(t, st, httpidem.WithTransactions())(h))
	defer srv.Close()

	const body = `{"amount":1990}`
	post := func() (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", `"rerun"`)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, got := post()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, body, got, "the committed attempt read the whole body")
	assert.Equal(t, int32(2), st.attempts.Load(), "the store ran the transaction twice")

	resp, got = post()
	assert.Equal(t, "true", resp.Header.Get(httpidem.ReplayedHeader))
	assert.Equal(t, body, got, "the replay is the committed answer")
}
