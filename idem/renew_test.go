package idem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// lateRenewals delivers every renewal delay late, even when the caller's
// context ended meanwhile, as a request already on the wire would be: the
// caller gives up at once, the store still gets the call. A renewal is a
// Renew, or (as the engine once renewed) a Claim by a token that claimed
// before. sent reports the keys whose renewal was sent.
type lateRenewals struct {
	store.Store
	delay time.Duration

	mu      sync.Mutex
	seen    map[store.Token]bool     // tokens that claimed
	sent    map[string]chan struct{} // closed once a renewal of the key was sent
	pending sync.WaitGroup           // renewals not yet delivered
}

func newLateRenewals(s store.Store, delay time.Duration) *lateRenewals {
	return &lateRenewals{Store: s, delay: delay, seen: map[store.Token]bool{}, sent: map[string]chan struct{}{}}
}

// renewing returns a channel closed once a renewal of key was sent.
func (l *lateRenewals) renewing(key string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sentLocked(key)
}

func (l *lateRenewals) sentLocked(key string) chan struct{} {
	ch := l.sent[key]
	if ch == nil {
		ch = make(chan struct{})
		l.sent[key] = ch
	}
	return ch
}

func (l *lateRenewals) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	l.mu.Lock()
	again := l.seen[tok]
	l.seen[tok] = true
	l.mu.Unlock()
	if !again {
		return l.Store.Claim(ctx, key, fp, tok, lease)
	}
	var c store.Claim
	err := l.late(ctx, key, func(ctx context.Context) (err error) {
		c, err = l.Store.Claim(ctx, key, fp, tok, lease)
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

func (l *lateRenewals) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	return l.late(ctx, key, func(ctx context.Context) error { return l.Store.Renew(ctx, key, tok, lease) })
}

func (l *lateRenewals) late(ctx context.Context, key string, call func(context.Context) error) error {
	done := make(chan error, 1)
	l.mu.Lock()
	ch := l.sentLocked(key)
	select {
	case <-ch:
	default:
		close(ch)
	}
	l.pending.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.pending.Done()
		time.Sleep(l.delay) // the latency of the wire is the subject
		done <- call(context.WithoutCancel(ctx))
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestLateRenewalCannotReviveReleasedKey: many runs release their key (a
// discarded verdict) while a renewal is on its way to the store. Once
// every renewal has landed, every key is free and a retry runs the work.
// With renewals sent as a re-entrant Claim the late renewal claims the
// released key again, and the retry finds it in progress.
func TestLateRenewalCannotReviveReleasedKey(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			const runs = 24
			// The lease is long enough that a key a late renewal revived
			// would still be held when the retries run, short enough that
			// the first renewal comes soon (at lease/2).
			const lease = 300 * time.Millisecond
			l := newLateRenewals(s, 25*time.Millisecond)
			e := newEngine(t, l, idem.WithLease(lease), idem.WithWait(0))
			base := key(t)
			var wg sync.WaitGroup
			for i := range runs {
				k := fmt.Sprintf("%s:%d", base, i)
				wg.Go(func() {
					res, err := e.Run(context.Background(), k, "", func(context.Context) idem.Verdict {
						select {
						case <-l.renewing(k): // a renewal is on its way: release now
						case <-time.After(20 * lease):
							t.Errorf("%s: no renewal was sent", k)
						}
						return idem.Discard("the provider declined")
					})
					assert.NoError(t, err)
					assert.Equal(t, idem.SettleReleased, res.Settle)
				})
			}
			wg.Wait()
			l.pending.Wait() // every late renewal has reached the store

			var effects atomic.Int32
			for i := range runs {
				k := fmt.Sprintf("%s:%d", base, i)
				_, err := s.Get(t.Context(), k)
				assert.ErrorIs(t, err, store.ErrNotFound, "%s: a late renewal brought the released key back", k)
				res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict {
					effects.Add(1)
					return idem.Keep([]byte("charged"))
				})
				require.NoError(t, err)
				assert.Equal(t, store.Acquired, res.Outcome, "%s: the retry must run", k)
			}
			assert.EqualValues(t, runs, effects.Load(), "every retry ran the work")
			l.pending.Wait()
		})
	}
}

// A renewal refused because the lease lapsed (the key is absent) ends the
// lease: the work's context is cancelled with store.ErrLeaseLost, the
// event says the lease lapsed, and no renewal follows.
func TestRunRenewFindsLeaseLapsed(t *testing.T) {
	s, clock := newManualMemory(t)
	f := &flaky{Store: s}
	const lease = 60 * time.Millisecond
	var rec recorder
	e := newEngine(t, f, idem.WithLease(lease), idem.WithTracer(events(rec.observe)))
	k := key(t)
	var renewsAtCancel int32
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		clock.Advance(time.Hour) // the lease lapses by the store's clock
		select {
		case <-ctx.Done():
		case <-time.After(100 * lease):
			t.Fatal("the work was not cancelled")
		}
		require.ErrorIs(t, context.Cause(ctx), store.ErrLeaseLost)
		renewsAtCancel = f.renews.Load()
		time.Sleep(3 * lease) // no renewal may follow: the real clock is the subject
		return idem.Discard("stopped")
	})
	require.NoError(t, err)
	assert.Equal(t, idem.SettleReleased, res.Settle)
	assert.Equal(t, renewsAtCancel, f.renews.Load(), "renewals stopped once the lease was over")
	assert.Equal(t, int32(1), renewsAtCancel)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var reasons []string
	for _, ev := range rec.ev {
		if ev.Kind == idem.LeaseLost {
			reasons = append(reasons, ev.Reason)
			assert.ErrorIs(t, ev.Err, store.ErrLeaseLost)
		}
	}
	assert.Equal(t, []string{"the lease lapsed"}, reasons)
}

// A renewal refused because our own Complete went through meanwhile
// stops renewing quietly: nothing is cancelled, nothing reported lost.
func TestRunRenewFindsOwnCompletion(t *testing.T) {
	s := newMemory(t)
	var tok atomic.Value
	f := &flaky{Store: s}
	f.claim = func(n int, tk store.Token) error {
		if n == 1 {
			tok.Store(tk)
		}
		return nil
	}
	const lease = 60 * time.Millisecond
	k := key(t)
	f.renew = func(n int) error {
		if n == 1 {
			// A Complete of this token lands before the renewal does.
			return s.Complete(context.Background(), k, tok.Load().(store.Token), []byte("done"), time.Hour)
		}
		return nil
	}
	var rec recorder
	e := newEngine(t, f, idem.WithLease(lease), idem.WithTracer(events(rec.observe)))
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		for f.renews.Load() == 0 {
			time.Sleep(time.Millisecond) // until the first renewal
		}
		time.Sleep(3 * lease) // no renewal may follow: the real clock is the subject
		assert.NoError(t, ctx.Err(), "a settled key does not cancel the work")
		return idem.Keep([]byte("done"))
	})
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	assert.EqualValues(t, 1, f.renews.Load(), "renewals stopped once the key was ours and completed")
	assert.Zero(t, rec.count(idem.LeaseLost))
}

// A renewal that finds the key held by another claim cancels the work and
// settles LeaseLost without writing (as TestRunLeaseLostToAnotherClaim),
// through Renew, and reports that another claim holds the key.
func TestRunRenewFindsAnotherHolder(t *testing.T) {
	s, clock := newManualMemory(t)
	var rec recorder
	e := newEngine(t, s, idem.WithLease(60*time.Millisecond), idem.WithTracer(events(rec.observe)))
	k := key(t)
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		clock.Advance(time.Hour)
		c, err := s.Claim(t.Context(), k, "", store.NewToken(), time.Hour)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		<-ctx.Done()
		return idem.Keep([]byte("mine"))
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	assert.Equal(t, idem.SettleLeaseLost, res.Settle)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var reasons []string
	for _, ev := range rec.ev {
		if ev.Kind == idem.LeaseLost {
			reasons = append(reasons, ev.Reason)
		}
	}
	assert.Contains(t, reasons, "another claim holds the key")
}

// While the result is being recorded (Complete failing), the store says the
// lease lapsed: nobody took the key, so the engine claims it back, renewal
// resumes, and the result is recorded once Complete goes through.
func TestRunCompleteReclaimsAfterLapseWhileSettling(t *testing.T) {
	s, clock := newManualMemory(t)
	const lease = 60 * time.Millisecond
	var rec recorder
	f := &flaky{Store: s}
	var failing atomic.Bool
	failing.Store(true)
	f.complete = func(n int) error {
		if n == 1 {
			clock.Advance(time.Hour) // the lease lapses by the store's clock
		}
		if failing.Load() {
			return errBlip
		}
		return nil
	}
	e := newEngine(t, f, idem.WithLease(lease), idem.WithTracer(events(func(ev idem.Event) {
		rec.observe(ev)
		if ev.Kind == idem.Renewed && rec.count(idem.LeaseLost) > 0 {
			failing.Store(false) // renewal resumed: let Complete through
		}
	})))
	k := key(t)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep([]byte("recorded")) })
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, "recorded", string(r.Response))
	assert.Equal(t, 1, rec.count(idem.LeaseLost), "the lapse was reported")
	assert.GreaterOrEqual(t, f.claims.Load(), int32(2), "the key was claimed back")
}
