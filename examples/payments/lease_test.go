package main

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

func TestModeFlags(t *testing.T) {
	c, _, err := parseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, modeTx, c.Mode, "transactions where the store has them, as before -mode existed")
	assert.Zero(t, c.Lease, "the engine's default lease")
	c, _, err = parseArgs([]string{"-mode", "lease", "-lease", "2s", "-payments-table", "pay_x"})
	require.NoError(t, err)
	assert.Equal(t, modeLease, c.Mode)
	assert.Equal(t, 2*time.Second, c.Lease)
	assert.Equal(t, "pay_x", c.PaymentsTable)
	for _, args := range [][]string{
		{"-mode", "optimistic"},
		{"-lease", "-1s"},
		{"-lease", "1ms"},
		{"-payments-table", ""},
	} {
		_, _, err := parseArgs(args)
		assert.Error(t, err, "%q", args)
	}
}

// storeKey is the key the demo's middleware stores for an anonymous
// caller's Idempotency-Key.
func storeKey(t *testing.T, key string) string {
	t.Helper()
	k, err := keyer.ScopedKey(key, "anonymous")
	require.NoError(t, err)
	return k
}

// TestLeaseMode runs the demo with -mode lease on every store: the payment
// commits while the key is still in flight (a slow_ms request shows it), the
// key is completed after, and a key whose holder's lease lapsed is taken
// over by the retry, which pays again and is told it is a takeover.
func TestLeaseMode(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			c := sc.cfg(t)
			c.Mode, c.Lease = modeLease, 200*time.Millisecond
			var mu sync.Mutex
			var takeovers []idem.Attempt
			d := startDemo(t, c)
			d.app.logTakeover = func(a idem.Attempt) {
				mu.Lock()
				defer mu.Unlock()
				takeovers = append(takeovers, a)
			}
			_, isTx := d.app.store.(store.Transactor)
			in, ok := d.app.store.(store.Inspector)
			require.True(t, ok, "every demo store is an Inspector")

			// A slow request: its key stays in progress past several leases
			// (the engine renews it), its payment is there before the answer.
			key := newKey()
			first := make(chan result, 1)
			go func() { first <- d.post(key, `{"amount":1990,"slow_ms":700}`) }()
			deadline := time.Now().Add(5 * time.Second)
			for d.count() == 0 {
				require.True(t, time.Now().Before(deadline), "the slow request made no payment")
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(3 * c.Lease) // past the first lease: renewed
			e, err := in.Lookup(t.Context(), storeKey(t, key))
			require.NoError(t, err)
			assert.Equal(t, store.StateInProgress, e.State, "a slow request's key stays in flight in lease mode (transactions available: %v)", isTx)
			f := <-first
			require.Equal(t, http.StatusCreated, f.status, f.body)
			assert.False(t, f.replayed)
			again := d.post(key, `{"amount":1990,"slow_ms":700}`)
			assert.True(t, again.replayed)
			assert.Equal(t, f.payment, again.payment)
			assert.Equal(t, 1, d.count())
			e, err = in.Lookup(t.Context(), storeKey(t, key))
			require.NoError(t, err)
			assert.Equal(t, store.StateCompleted, e.State)

			// A crashed holder: claimed, never renewed, its lease lapses.
			// The retry takes the key over (attempt 2) and pays.
			key = newKey()
			_, err = d.app.store.Claim(t.Context(), storeKey(t, key), "not the demo's", store.NewToken(), 50*time.Millisecond)
			require.NoError(t, err)
			for {
				e, err := in.Lookup(t.Context(), storeKey(t, key))
				if errors.Is(err, store.ErrNotFound) || (err == nil && e.State == store.StateLapsed) {
					break
				}
				require.True(t, time.Now().Before(deadline.Add(5*time.Second)), "the crashed holder's lease never lapsed")
				time.Sleep(10 * time.Millisecond)
			}
			r := d.post(key, `{"amount":500}`)
			require.Equal(t, http.StatusCreated, r.status, "the retry takes the lapsed key over: %s", r.body)
			assert.False(t, r.replayed)
			assert.Equal(t, 2, d.count())
			e, err = in.Lookup(t.Context(), storeKey(t, key))
			require.NoError(t, err)
			assert.Equal(t, uint32(2), e.Attempt, "a takeover is the key's second attempt")
			mu.Lock()
			defer mu.Unlock()
			if assert.Len(t, takeovers, 1, "the handler was told it took the key over") {
				assert.Equal(t, uint32(2), takeovers[0].Number)
				assert.Equal(t, e.Fence, takeovers[0].Fence)
			}
		})
	}
}

// TestSlowMSBounds: slow_ms is checked like the amount.
func TestSlowMSBounds(t *testing.T) {
	d := startDemo(t, storeCases()[1].cfg(t)) // memory
	for _, body := range []string{`{"amount":1,"slow_ms":-1}`, `{"amount":1,"slow_ms":600001}`, `{"amount":1,"slow_ms":"1s"}`} {
		r := d.post(newKey(), body)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
	}
	assert.Equal(t, 0, d.count())
}
