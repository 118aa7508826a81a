package idem_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// attempts records the Attempt of every Acquired event.
type attempts struct {
	mu sync.Mutex
	a  []idem.Attempt
}

func (r *attempts) observe(ev idem.Event) {
	if ev.Kind == idem.Acquired {
		r.mu.Lock()
		r.a = append(r.a, ev.Attempt)
		r.mu.Unlock()
	}
}

func (r *attempts) all() []idem.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]idem.Attempt(nil), r.a...)
}

// The work's context carries the Attempt of the claim that acquired the
// key, the Acquired event too; outside a work there is none.
func TestAttemptFromFirstClaim(t *testing.T) {
	s := newMemory(t)
	var seen attempts
	e := newEngine(t, s, idem.WithTracer(events(seen.observe)))
	k := key(t)
	var got idem.Attempt
	var ok bool
	_, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		// Through a context derived from the work's, as a handler's is.
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		got, ok = idem.AttemptFrom(dctx)
		return idem.Keep(nil)
	})
	require.NoError(t, err)
	require.True(t, ok, "the work's context carries its Attempt")
	assert.Equal(t, uint32(1), got.Number)
	assert.False(t, got.Takeover)
	assert.NotZero(t, got.Fence)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, r.Fence, got.Fence, "the Fence is the record's")
	assert.Equal(t, []idem.Attempt{got}, seen.all(), "the Acquired event carries the Attempt")

	_, ok = idem.AttemptFrom(t.Context())
	assert.False(t, ok, "no Attempt outside a work")
}

// The work's context still ends with the caller's and carries the lease's
// cause: carrying the Attempt changes nothing of its cancellation.
func TestAttemptContextCancels(t *testing.T) {
	e := newEngine(t, newMemory(t))
	ctx, cancel := context.WithCancel(t.Context())
	_, err := e.Run(ctx, key(t), "", func(wctx context.Context) idem.Verdict {
		child, stop := context.WithCancel(wctx)
		defer stop()
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Error("a context derived from the work's did not end with the caller's")
		}
		assert.ErrorIs(t, context.Cause(child), context.Canceled)
		return idem.Keep(nil)
	})
	require.NoError(t, err)
}

// zeroAttempts reports every record as one written before attempts were
// counted: Attempt and Fence zero.
type zeroAttempts struct{ store.Store }

func (z zeroAttempts) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	c, err := z.Store.Claim(ctx, key, fp, tok, lease)
	c.Record.Attempt, c.Record.Fence = 0, 0
	return c, err
}

func TestAttemptFromOldRecord(t *testing.T) {
	e := newEngine(t, zeroAttempts{newMemory(t)})
	var got idem.Attempt
	var ok bool
	_, err := e.Run(t.Context(), key(t), "", func(ctx context.Context) idem.Verdict {
		got, ok = idem.AttemptFrom(ctx)
		return idem.Keep(nil)
	})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, idem.Attempt{}, got, "a store that counts no attempts gives Number 0, no takeover")
}

// TestTakeoverEndToEnd: the first run's heartbeat cannot reach the store
// and its lease lapses by the store's clock; a second run takes the key
// over and is told so (attempt 2, a larger fence); the first run's result
// is refused and the second's stays.
func TestTakeoverEndToEnd(t *testing.T) {
	s, clock := newManualMemory(t)
	f := &flaky{Store: s, renew: func(int) error { return errBlip }} // the first holder's heartbeat is cut off
	var seen attempts
	// An hour of the process clock: the store's clock, moved by hand, is
	// the one that lapses the lease.
	e := newEngine(t, f, idem.WithLease(time.Hour), idem.WithWait(0), idem.WithTracer(events(seen.observe)))
	k := key(t)
	var first, second idem.Attempt
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		first, _ = idem.AttemptFrom(ctx)
		clock.Advance(2 * time.Hour) // the lease lapses in the store
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			second, _ = idem.AttemptFrom(ctx)
			return idem.Keep([]byte("second"))
		})
		require.NoError(t, err)
		require.Equal(t, store.Acquired, res.Outcome, "the lapsed key is taken over")
		return idem.Keep([]byte("first"))
	})
	require.ErrorIs(t, err, store.ErrLeaseLost, "the first holder's late result is refused")
	assert.Equal(t, idem.SettleLeaseLost, res.Settle)

	assert.Equal(t, idem.Attempt{Number: 1, Fence: first.Fence}, first)
	assert.Equal(t, uint32(2), second.Number)
	assert.True(t, second.Takeover)
	assert.Greater(t, second.Fence, first.Fence)
	assert.Equal(t, []idem.Attempt{first, second}, seen.all())

	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, "second", string(r.Response), "the taker's result stays")
	assert.Equal(t, uint32(2), r.Attempt)
}

func TestAttemptFromDo(t *testing.T) {
	e := newEngine(t, newMemory(t))
	got, err := idem.Do(t.Context(), e, key(t), func(ctx context.Context) (idem.Attempt, error) {
		a, ok := idem.AttemptFrom(ctx)
		if !ok {
			t.Error("Do's fn has no Attempt")
		}
		return a, nil
	})
	require.NoError(t, err)
	assert.Equal(t, uint32(1), got.Number)
	assert.NotZero(t, got.Fence)
}

func TestAttemptFromTx(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		var seen attempts
		e := newEngine(t, b.s, idem.WithTracer(events(seen.observe)))
		var got idem.Attempt
		var ok bool
		k := key(t)
		_, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			got, ok = idem.AttemptFrom(ctx)
			return idem.Keep(nil)
		}, idem.InTx())
		require.NoError(t, err)
		require.True(t, ok, "the transactional work's context carries its Attempt")
		assert.Equal(t, []idem.Attempt{got}, seen.all())
		r, err := b.s.Get(t.Context(), k)
		require.NoError(t, err)
		assert.Equal(t, idem.Attempt{Number: r.Attempt, Fence: r.Fence}, got, "the claim's attempt and fence, as the record keeps them")
		assert.Equal(t, uint32(1), got.Number)
	})
}

// In transactional mode a work that ran past half the lease (not past all
// of it) is renewed once, with the transaction's Store.Renew, before
// Complete: one renewal call, which succeeds, and no claim again.
func TestTxRenewsWithStoreRenew(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		const lease = 600 * time.Millisecond
		var mu sync.Mutex
		var renewals []error
		ct := &countingTx{Store: b.s, tx: b.s.(store.Transactor)}
		e := newEngine(t, ct, idem.WithLease(lease), idem.WithTracer(events(func(ev idem.Event) {
			if ev.Kind == idem.StoreCall && ev.Op == idem.OpRenew {
				mu.Lock()
				renewals = append(renewals, ev.Err)
				mu.Unlock()
			}
		})))
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			time.Sleep(lease/2 + lease/10) // past half the lease: the real clock is the subject
			require.NoError(t, b.apply(ctx, k))
			return idem.Keep([]byte("renewed"))
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleCompleted, res.Settle)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []error{nil}, renewals, "one renewal, that went through")
		assert.EqualValues(t, 1, ct.renews.Load(), "the renewal is the transaction's Store.Renew")
		assert.Equal(t, 1, b.count(t, k))
	})
}

// countingTx counts the Renew calls of the stores its transactions give.
type countingTx struct {
	store.Store
	tx     store.Transactor
	renews atomic.Int32
}

func (c *countingTx) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return c.tx.InTx(ctx, func(ctx context.Context, s store.Store) error {
		return fn(ctx, countingRenew{Store: s, n: &c.renews})
	})
}

type countingRenew struct {
	store.Store
	n *atomic.Int32
}

func (c countingRenew) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	c.n.Add(1)
	return c.Store.Renew(ctx, key, tok, lease)
}
