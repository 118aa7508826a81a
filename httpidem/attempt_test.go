package httpidem_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// The handler learns which claim of its key it runs under from its
// request's context, in lease and transactional mode alike.
func TestHandlerSeesAttempt(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		var got idem.Attempt
		var ok bool
		mw := mustNew(t, s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok = idem.AttemptFrom(r.Context())
			w.WriteHeader(201)
		}))
		require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
		require.True(t, ok, "the handler's context carries its Attempt")
		rec, err := s.Get(context.Background(), mustScoped(t, "k"))
		require.NoError(t, err)
		assert.Equal(t, idem.Attempt{Number: 1, Fence: rec.Fence}, got)
		assert.NotZero(t, got.Fence)
	})
}

// A handler that takes over a key whose holder's lease lapsed is told so.
func TestHandlerSeesTakeover(t *testing.T) {
	s := newFakeStore()
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	first, err := s.Claim(context.Background(), mustScoped(t, "k"), fpOf(t, `{}`), "crashed", time.Minute)
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(time.Hour) // the crashed holder's lease lapses
	mu.Unlock()
	var got idem.Attempt
	mw := mustNew(t, s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = idem.AttemptFrom(r.Context())
		w.WriteHeader(201)
	}))
	require.Equal(t, 201, serve(mw, newReq(`{}`, "k")).Code)
	assert.Equal(t, uint32(2), got.Number)
	assert.True(t, got.Takeover)
	assert.Greater(t, got.Fence, first.Record.Fence)
}
