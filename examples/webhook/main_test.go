package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/leakcheck"
	"github.com/idemkit/idemkit/store/sqlite"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "webhook.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	h, err := newReceiver(t.Context(), st, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func deliver(t *testing.T, srv *httptest.Server, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/webhook", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var got struct{ Status string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return resp.StatusCode, got.Status
}

func balance(t *testing.T, srv *httptest.Server) (credits, sum int64) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/balance")
	require.NoError(t, err)
	defer resp.Body.Close()
	var b struct{ Credits, Balance int64 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
	return b.Credits, b.Balance
}

func TestSameWebhookTwice(t *testing.T) {
	srv := newTestServer(t)
	body := `{"id":"evt_1","type":"payment.succeeded","amount":1990}`
	code, status := deliver(t, srv, body)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "processed", status)
	code, status = deliver(t, srv, body)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "duplicate", status)
	n, sum := balance(t, srv)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, int64(1990), sum)
}

func TestSameWebhookConcurrently(t *testing.T) {
	srv := newTestServer(t)
	body := `{"id":"evt_burst","type":"payment.succeeded","amount":500}`
	const n = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	for range n {
		wg.Go(func() {
			code, status := deliver(t, srv, body)
			assert.Equal(t, http.StatusOK, code)
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"processed": 1, "duplicate": n - 1}, statuses)
	credits, sum := balance(t, srv)
	assert.Equal(t, int64(1), credits)
	assert.Equal(t, int64(500), sum)
}

// A failed delivery writes nothing and answers 500, so the sender retries;
// here the event is invalid, so every retry fails the same way.
func TestFailedWebhookWritesNothing(t *testing.T) {
	srv := newTestServer(t)
	code, status := deliver(t, srv, `{"id":"evt_bad","type":"payment.succeeded","amount":0}`)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, "failed", status)
	n, _ := balance(t, srv)
	assert.Zero(t, n)
	// Fixed by the sender, the same id is processed: nothing was recorded.
	code, status = deliver(t, srv, `{"id":"evt_bad","type":"payment.succeeded","amount":10}`)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "processed", status)
}

func TestBadRequest(t *testing.T) {
	srv := newTestServer(t)
	for _, body := range []string{`not json`, `{"type":"payment.succeeded"}`} {
		resp, err := http.Post(srv.URL+"/webhook", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	}
}
