package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

func TestTwiceInARow(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		const id = "evt_twice"

		out, err := d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)

		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)

		assert.Equal(t, 1, fx.count(id), "effect applied once")
		rec, err := subj.Store.Get(t.Context(), keyOf(d, id))
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, rec.Status)
	})
}

// TestConcurrentDeliveries delivers one event 20 times at once, first as a
// free race, then with the winner held inside fn until every other delivery
// has returned, so that each of them must see InFlight.
func TestConcurrentDeliveries(t *testing.T) {
	const n = 20
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		t.Run("Race", func(t *testing.T) {
			fx := newEffects()
			d := newDeduper(t, subj.Store)
			const id = "evt_race"
			outs := deliverConcurrently(t, n, func() (dedup.Outcome, error) {
				return d.Process(t.Context(), id, fx.fn(id))
			})
			assert.Equal(t, 1, outs[dedup.Processed], "outcomes %v", outs)
			assert.Equal(t, n-1, outs[dedup.Duplicate]+outs[dedup.InFlight], "outcomes %v", outs)
			// Redeliver what was in flight until acked: all duplicates now.
			for range outs[dedup.InFlight] {
				out, err := d.Process(t.Context(), id, fx.fn(id))
				require.NoError(t, err)
				assert.Equal(t, dedup.Duplicate, out)
			}
			assert.Equal(t, 1, fx.count(id), "effect applied once")
		})

		t.Run("WhileInFlight", func(t *testing.T) {
			fx := newEffects()
			d := newDeduper(t, subj.Store)
			const id = "evt_inflight"
			othersReturned := make(chan struct{})
			fn := func(context.Context) error {
				// Only the first to apply waits; a second acquirer (a bug)
				// returns at once and is counted.
				if fx.apply(id) == 1 {
					<-othersReturned
				}
				return nil
			}
			var mu sync.Mutex
			returned := 0
			outs := deliverConcurrently(t, n, func() (dedup.Outcome, error) {
				out, err := d.Process(t.Context(), id, fn)
				if out != dedup.Processed {
					mu.Lock()
					if returned++; returned == n-1 {
						close(othersReturned)
					}
					mu.Unlock()
				}
				return out, err
			})
			assert.Equal(t, map[dedup.Outcome]int{dedup.Processed: 1, dedup.InFlight: n - 1}, outs)
			assert.Equal(t, 1, fx.count(id), "effect applied once")
			out, err := d.Process(t.Context(), id, fn)
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
		})
	})
}

// deliverConcurrently runs deliver n times at once and counts the outcomes.
func deliverConcurrently(t *testing.T, n int, deliver func() (dedup.Outcome, error)) map[dedup.Outcome]int {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	outs := map[dedup.Outcome]int{}
	var errs []error
	for range n {
		wg.Go(func() {
			<-start
			out, err := deliver()
			mu.Lock()
			defer mu.Unlock()
			outs[out]++
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return outs
}

func TestFailedThenRedelivered(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		const id = "evt_fail"
		boom := errors.New("downstream unavailable")

		out, err := d.Process(t.Context(), id, func(context.Context) error { return boom })
		assert.Equal(t, dedup.Failed, out)
		assert.Same(t, boom, err, "fn's own error is returned")
		_, err = subj.Store.Get(t.Context(), keyOf(d, id))
		assert.ErrorIs(t, err, store.ErrNotFound, "the id was released")

		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out, "the redelivery runs fn")

		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

func TestPanicReleases(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		const id = "evt_panic"

		recovered := func() (v any) {
			defer func() { v = recover() }()
			_, _ = d.Process(t.Context(), id, func(context.Context) error { panic("handler bug") })
			return nil
		}()
		assert.Equal(t, "handler bug", recovered, "the panic goes on to the caller")
		_, err := subj.Store.Get(t.Context(), keyOf(d, id))
		assert.ErrorIs(t, err, store.ErrNotFound, "the id was released")

		out, err := d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out, "the redelivery runs fn")
		assert.Equal(t, 1, fx.count(id))
	})
}

// TestLeaseLapse freezes a consumer inside fn for longer than the lease (its
// renewals hang), lets a redelivery claim and process the id, and shows what
// the frozen run sees.
func TestLeaseLapse(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		realClockOnly(t, subj)
		const lease = 300 * time.Millisecond

		// The frozen run's lease runs out: its fn's context is cancelled
		// with a cause matching store.ErrLeaseLost, and Process returns
		// Failed with an error matching store.ErrLeaseLost.
		t.Run("LapseCancelsStaleRun", func(t *testing.T) {
			fx := newEffects()
			const id = "evt_lapse_renewal"
			fz := &freezer{Store: subj.Store}
			stale := newDeduper(t, fz, idem.WithLease(lease))
			fresh := newDeduper(t, subj.Store, idem.WithLease(lease))

			started := make(chan struct{})
			type result struct {
				out          dedup.Outcome
				err, fnCause error
			}
			done := make(chan result, 1)
			fz.freeze()
			defer fz.thaw()
			go func() {
				var cause error
				out, err := stale.Process(t.Context(), id, func(ctx context.Context) error {
					close(started)
					<-ctx.Done() // a frozen consumer, woken by the cancellation
					cause = context.Cause(ctx)
					return ctx.Err() // the effect is not applied
				})
				done <- result{out, err, cause}
			}()
			select {
			case <-started:
			case r := <-done: // the claim itself failed (a slow claim on a loaded machine)
				t.Fatalf("the stale run did not start: %v, %v", r.out, r.err)
			}
			r := recv(t, done)
			assert.Equal(t, dedup.Failed, r.out)
			assert.ErrorIs(t, r.err, store.ErrLeaseLost)
			assert.ErrorIs(t, r.err, context.Canceled, "fn's error is in the chain too")
			assert.ErrorIs(t, r.fnCause, store.ErrLeaseLost, "context.Cause tells fn why")
			t.Logf("the stale run sees: %v, %v", r.out, r.err)
			advance(t, subj, lease/2) // the lapsed lease is over in the store too

			out, err := fresh.Process(t.Context(), id, fx.fn(id))
			require.NoError(t, err)
			require.Equal(t, dedup.Processed, out, "the redelivery runs fn after the lease lapsed")
			assert.Equal(t, 1, fx.count(id))
			out, err = fresh.Process(t.Context(), id, fx.fn(id))
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out, "a later redelivery is a duplicate")
		})

		// The frozen run wakes and returns nil after another delivery took
		// the id: the store refuses its completion (fencing) and Process
		// returns Failed with store.ErrLeaseLost. Its effect did happen:
		// lease mode cannot take back what fn already did, which is why
		// effects outside the database must be idempotent themselves.
		t.Run("StaleCompletionRefused", func(t *testing.T) {
			fx := newEffects()
			const id = "evt_lapse_complete"
			fz := &freezer{Store: subj.Store}
			stale := newDeduper(t, fz, idem.WithLease(lease))
			fresh := newDeduper(t, subj.Store, idem.WithLease(lease))

			started, wake := make(chan struct{}), make(chan struct{})
			type result struct {
				out dedup.Outcome
				err error
			}
			done := make(chan result, 1)
			fz.freeze()
			go func() {
				out, err := stale.Process(t.Context(), id, func(ctx context.Context) error {
					close(started)
					<-wake // frozen; ignores ctx
					fx.apply(id)
					return nil
				})
				done <- result{out, err}
			}()
			select {
			case <-started:
			case r := <-done: // the claim itself failed (a slow claim, a server down)
				t.Fatalf("the stale run did not start: %v, %v", r.out, r.err)
			}
			advance(t, subj, lease+lease/2)

			out, err := fresh.Process(t.Context(), id, fx.fn(id))
			require.NoError(t, err)
			require.Equal(t, dedup.Processed, out)
			owner, err := subj.Store.Get(t.Context(), keyOf(stale, id))
			require.NoError(t, err)

			fz.thaw()
			close(wake)
			r := recv(t, done)
			assert.Equal(t, dedup.Failed, r.out)
			assert.ErrorIs(t, r.err, store.ErrLeaseLost)
			t.Logf("the stale run sees: %v, %v", r.out, r.err)

			rec, err := subj.Store.Get(t.Context(), keyOf(stale, id))
			require.NoError(t, err)
			assert.Equal(t, owner.Token, rec.Token, "the redelivery's record is untouched")
			assert.Equal(t, owner.ExpiresAt, rec.ExpiresAt)
			assert.Equal(t, 2, fx.count(id), "both runs applied the effect: fencing guards the record, not the effect")
		})
	})
}

// TestHeartbeatRenews holds fn for longer than the lease: a redelivery after
// the original lease would have lapsed still sees InFlight.
func TestHeartbeatRenews(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		realClockOnly(t, subj)
		fx := newEffects()
		const id = "evt_slow"
		const lease = 300 * time.Millisecond
		slow := newDeduper(t, subj.Store, idem.WithLease(lease))
		other := newDeduper(t, subj.Store, idem.WithLease(lease))

		started, finish := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			out, err := slow.Process(t.Context(), id, func(ctx context.Context) error {
				close(started)
				<-finish
				fx.apply(id)
				return ctx.Err()
			})
			if err == nil && out != dedup.Processed {
				err = fmt.Errorf("outcome %v, want processed", out)
			}
			done <- err
		}()
		<-started
		advance(t, subj, lease*4/3)

		out, err := other.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.InFlight, out, "the renewed lease still holds the id")

		close(finish)
		require.NoError(t, recv(t, done))
		out, err = other.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

func TestScopes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		stripe := newDeduper(t, subj.Store, dedup.WithScope("stripe"))
		github := newDeduper(t, subj.Store, dedup.WithScope("github"))
		plain := newDeduper(t, subj.Store)
		// Scope "a:b" + id "c" and scope "a" + id "b:c" must not collide.
		ab := newDeduper(t, subj.Store, dedup.WithScope("a:b"))
		a := newDeduper(t, subj.Store, dedup.WithScope("a"))

		cases := []struct {
			d  *dedup.Deduper
			id string
		}{{stripe, "evt_1"}, {github, "evt_1"}, {plain, "evt_1"}, {ab, "c"}, {a, "b:c"}}
		for _, c := range cases {
			out, err := c.d.Process(t.Context(), c.id, fx.fn(keyOf(c.d, c.id)))
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out, "%s", keyOf(c.d, c.id))
		}
		for _, c := range cases {
			out, err := c.d.Process(t.Context(), c.id, fx.fn(keyOf(c.d, c.id)))
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out, "%s", keyOf(c.d, c.id))
			assert.Equal(t, 1, fx.count(keyOf(c.d, c.id)))
		}
		assert.Equal(t, "5:dedup|6:stripe|5:evt_1", keyOf(stripe, "evt_1"))
		assert.Equal(t, "5:dedup|0:|5:evt_1", keyOf(plain, "evt_1"))
	})
}

func TestCancelledContext(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		out, err := d.Process(ctx, "evt_cancelled", fx.fn("evt_cancelled"))
		assert.Equal(t, dedup.Failed, out)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, fx.count("evt_cancelled"), "fn not called")
		_, err = subj.Store.Get(t.Context(), keyOf(d, "evt_cancelled"))
		assert.ErrorIs(t, err, store.ErrNotFound, "nothing claimed")
	})
}

// TestCancelledDuringFn: the caller's context is cancelled while fn runs and
// fn still returns nil (its effect happened): the id is recorded anyway.
func TestCancelledDuringFn(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		const id = "evt_cancel_during"
		ctx, cancel := context.WithCancel(t.Context())
		out, err := d.Process(ctx, id, func(fnCtx context.Context) error {
			fx.apply(id)
			cancel()
			<-fnCtx.Done() // fn's context follows the caller's
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)
		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
	})
}
