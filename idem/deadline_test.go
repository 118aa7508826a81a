package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// lockedUntil runs work on e under ctx and returns how far ahead of the
// claim the stored lease ran, as the work saw it.
func lockedUntil(t *testing.T, e *idem.Engine, s store.Store, ctx context.Context) time.Duration {
	t.Helper()
	k := key(t)
	var ahead time.Duration
	start := time.Now()
	_, err := e.Run(ctx, k, "", func(context.Context) idem.Verdict {
		r, err := s.Get(t.Context(), k)
		require.NoError(t, err)
		ahead = r.LockedUntil.Sub(start)
		return idem.Keep(nil)
	})
	require.NoError(t, err)
	return ahead
}

func TestLeaseFromDeadline(t *testing.T) {
	s := newMemory(t)
	e := newEngine(t, s, idem.WithLease(time.Hour), idem.WithLeaseFromDeadline(2*time.Second))

	t.Run("capped", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		ahead := lockedUntil(t, e, s, ctx)
		assert.Greater(t, ahead, 4*time.Second, "time left plus the margin")
		assert.LessOrEqual(t, ahead, 5*time.Second+100*time.Millisecond, "not WithLease's hour")
	})
	t.Run("floor", func(t *testing.T) {
		e := newEngine(t, s, idem.WithLease(time.Hour), idem.WithLeaseFromDeadline(100*time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		ahead := lockedUntil(t, e, s, ctx)
		assert.Greater(t, ahead, idem.MinDeadlineLease-100*time.Millisecond, "at least the floor")
		assert.LessOrEqual(t, ahead, idem.MinDeadlineLease+100*time.Millisecond)

		ctx, cancel = context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		<-ctx.Done()
		// A caller whose deadline passed gets no work run (its context is
		// done), so ask for the lease as the engine computes it.
		assert.Equal(t, idem.MinDeadlineLease, idem.LeaseFor(e, ctx), "a deadline past still gets the floor")
	})
	t.Run("no deadline", func(t *testing.T) {
		ahead := lockedUntil(t, e, s, t.Context())
		assert.Greater(t, ahead, 59*time.Minute, "WithLease's lease")
	})
	t.Run("shorter WithLease wins", func(t *testing.T) {
		e := newEngine(t, s, idem.WithLease(500*time.Millisecond), idem.WithLeaseFromDeadline(time.Minute))
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		ahead := lockedUntil(t, e, s, ctx)
		assert.LessOrEqual(t, ahead, 600*time.Millisecond)
		assert.Equal(t, 500*time.Millisecond, idem.LeaseFor(e, ctx), "WithLease's lease, under the floor too")
	})
	t.Run("off by default", func(t *testing.T) {
		e := newEngine(t, s, idem.WithLease(time.Hour))
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		assert.Greater(t, lockedUntil(t, e, s, ctx), 59*time.Minute)
	})
}

// Everything derived from the lease follows the run's: with WithLease's
// hour the first renewal would be due in half an hour, with the run's
// lease (about 1.2 s) it comes within a second, and it extends the stored
// lease by the run's lease, not by the hour.
func TestLeaseFromDeadlineDrivesHeartbeat(t *testing.T) {
	s := newMemory(t)
	renewed := make(chan struct{}, 4)
	e := newEngine(t, s, idem.WithLease(time.Hour), idem.WithLeaseFromDeadline(time.Second), idem.WithTracer(events(func(ev idem.Event) {
		if ev.Kind == idem.Renewed {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	})))
	k := key(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := e.Run(ctx, k, "", func(wctx context.Context) idem.Verdict {
		<-wctx.Done() // the caller's deadline ends the work's context
		select {
		case <-renewed:
		case <-time.After(5 * time.Second):
			t.Error("no renewal on the run's lease")
		}
		r, err := s.Get(t.Context(), k)
		require.NoError(t, err)
		assert.Less(t, time.Until(r.LockedUntil), 2*time.Second, "renewed by the run's lease")
		return idem.Keep([]byte("late but recorded"))
	})
	require.NoError(t, err)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, "late but recorded", string(r.Response), "the margin let the result be recorded after the deadline")
}

// The slow-claim rule applies to the run's lease: a claim that takes more
// than half of it is not acted on, however long WithLease's lease is.
func TestLeaseFromDeadlineSlowClaim(t *testing.T) {
	f := &flaky{Store: newMemory(t), claim: func(n int, _ store.Token) error {
		if n == 1 {
			time.Sleep(800 * time.Millisecond) // a slow reply is the subject
		}
		return nil
	}}
	e := newEngine(t, f, idem.WithLease(time.Hour), idem.WithLeaseFromDeadline(time.Millisecond))
	// The run's lease is about 1.2 s: the claim takes more than half of it,
	// and ends well before the caller's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 1200*time.Millisecond)
	defer cancel()
	_, err := e.Run(ctx, key(t), "", func(context.Context) idem.Verdict {
		t.Error("the work ran on a claim slower than half the run's lease")
		return idem.Keep(nil)
	})
	require.ErrorIs(t, err, idem.ErrSlowClaim)
}
