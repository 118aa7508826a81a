package httpidem_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/redacttest"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// The raw parts of the scripted run's keys: the tenant the scope function
// adds and the client's key. Neither may reach a log line.
const (
	rawTenant = "tenant-acme-7Qx"
	rawClient = "client-key-Zk41"
)

// scriptHTTP sends a scripted set of requests: a first request whose
// Complete is retried, its replay, a 422, a 409, a 500 whose release fails,
// a 503 (the store is down) and a lease lost while the handler runs. It
// returns the log and the scoped keys used.
func scriptHTTP(t *testing.T, opts ...any) (string, []string) {
	t.Helper()
	clock := storetest.NewManualClock(time.Now())
	mem, err := memory.New(memory.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { mem.Close() })
	client := func(name string) string { return rawClient + "-" + name }
	scoped := func(name string) string { return mustScoped(t, client(name), rawTenant) }
	q := &redacttest.QuotingStore{Err: errDown, Store: mem, Fail: func(op, key string, n int) bool {
		switch {
		case key == scoped("done") && op == "complete":
			return n <= 2
		case key == scoped("fail") && op == "release":
			return true
		case key == scoped("down") && op == "claim":
			return true
		}
		return false
	}}
	var logs redacttest.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Idempotency-Key") {
		case client("busy"):
			close(started)
			<-release
		case client("fail"):
			w.WriteHeader(500)
			return
		case client("lost"):
			clock.Advance(time.Hour) // the lease lapses; another claim takes the key
			c, err := mem.Claim(context.Background(), scoped("lost"), "", store.NewToken(), time.Hour)
			assert.NoError(t, err)
			assert.Equal(t, store.Acquired, c.Outcome)
			<-r.Context().Done()
		}
		w.WriteHeader(201)
	})
	mw := mustNew(t, q, append([]any{
		idem.WithLogger(logger), idem.WithLease(200 * time.Millisecond),
		httpidem.WithScope(func(*http.Request) ([]string, error) { return []string{rawTenant}, nil }),
	}, opts...)...)(h)

	assert.Equal(t, 201, serve(mw, newReq(`{}`, client("done"))).Code)
	w := serve(mw, newReq(`{}`, client("done")))
	assert.Equal(t, 201, w.Code)
	assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
	requireProblem(t, serve(mw, newReq(`{"other":1}`, client("done"))), 422, httpidem.CodeKeyMismatch)
	done := make(chan int)
	go func() { done <- serve(mw, newReq(`{}`, client("busy"))).Code }()
	<-started
	requireProblem(t, serve(mw, newReq(`{}`, client("busy"))), 409, httpidem.CodeInProgress)
	close(release)
	assert.Equal(t, 201, <-done)
	assert.Equal(t, 500, serve(mw, newReq(`{}`, client("fail"))).Code)
	requireProblem(t, serve(mw, newReq(`{}`, client("down"))), 503, httpidem.CodeStoreUnavailable)
	assert.Equal(t, 201, serve(mw, newReq(`{}`, client("lost"))).Code)
	return logs.String(), []string{scoped("done"), scoped("fail"), scoped("down"), scoped("lost")}
}

func TestLogsCarryNoRawKeyByDefault(t *testing.T) {
	logs, keys := scriptHTTP(t)
	require.GreaterOrEqual(t, strings.Count(logs, "\n"), 5, "retried complete, failed release, store down, lease lost:\n%s", logs)
	assert.NotContains(t, logs, rawTenant, "the tenant scope is in a log line")
	assert.NotContains(t, logs, rawClient, "the client's key is in a log line")
	red := keyer.DefaultRedactor()
	for _, k := range keys {
		assert.Contains(t, logs, red(k), "every failing key's lines carry its hash")
	}
}

func TestLogsCarryRawKeysWhenChosen(t *testing.T) {
	logs, keys := scriptHTTP(t, idem.WithKeyRedactor(keyer.RawKeys()))
	for _, k := range keys {
		j, err := json.Marshal(k)
		require.NoError(t, err)
		assert.Contains(t, logs, string(j), "raw keys were chosen")
	}
	assert.Contains(t, logs, rawTenant)
}

func TestKeyRedactorNil(t *testing.T) {
	_, err := newMW(newFakeStore(), idem.WithKeyRedactor(nil))
	require.ErrorIs(t, err, store.ErrInvalid)
}
