package dedup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// The processed_events pattern: the id and fn's row commit in one
// transaction.
func TestProcessTx(t *testing.T) {
	t.Run("TwiceInARow", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			const id = "evt_tx_twice"
			apply := func(ctx context.Context) error { return fx.apply(ctx, id) }
			out, err := d.ProcessTx(t.Context(), id, apply)
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out)
			out, err = d.ProcessTx(t.Context(), id, apply)
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
			assert.Equal(t, 1, fx.count(t, id), "one row")
		})
	})

	// 20 concurrent deliveries: one commits; the others wait on the key's
	// row until it does and then see a Duplicate (never InFlight).
	t.Run("Concurrent", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			const id = "evt_tx_concurrent"
			outs := deliverConcurrently(t, 20, func() (dedup.Outcome, error) {
				return d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			})
			assert.Equal(t, map[dedup.Outcome]int{dedup.Processed: 1, dedup.Duplicate: 19}, outs)
			assert.Equal(t, 1, fx.count(t, id), "one row")
		})
	})

	t.Run("FailedRollsBack", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			const id = "evt_tx_fail"
			boom := errors.New("validation failed after the insert")
			out, err := d.ProcessTx(t.Context(), id, func(ctx context.Context) error {
				if err := fx.apply(ctx, id); err != nil {
					return err
				}
				return boom
			})
			assert.Equal(t, dedup.Failed, out)
			assert.ErrorIs(t, err, boom)
			assert.Zero(t, fx.count(t, id), "the row rolled back with the claim")
			_, err = subj.Store.Get(t.Context(), keyOf(d, id))
			assert.ErrorIs(t, err, store.ErrNotFound, "the id is free")

			out, err = d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out, "the redelivery runs fn")
			assert.Equal(t, 1, fx.count(t, id))
		})
	})

	t.Run("PanicRollsBack", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			const id = "evt_tx_panic"
			recovered := func() (v any) {
				defer func() { v = recover() }()
				_, _ = d.ProcessTx(t.Context(), id, func(ctx context.Context) error {
					if err := fx.apply(ctx, id); err != nil {
						return err
					}
					panic("handler bug")
				})
				return nil
			}()
			assert.Equal(t, "handler bug", recovered)
			assert.Zero(t, fx.count(t, id), "the row rolled back")
			_, err := subj.Store.Get(t.Context(), keyOf(d, id))
			assert.ErrorIs(t, err, store.ErrNotFound, "the id is free")

			out, err := d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out)
			assert.Equal(t, 1, fx.count(t, id))
		})
	})

	// A lease-mode Process of the same id is running: ProcessTx reports
	// InFlight without waiting, writes nothing, and the lease holder's
	// completion makes the next ProcessTx a Duplicate.
	t.Run("LeaseHolderInFlight", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			const id = "evt_tx_mixed"
			started, finish := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				out, err := d.Process(t.Context(), id, func(ctx context.Context) error {
					close(started)
					<-finish
					return nil
				})
				if err == nil && out != dedup.Processed {
					err = errors.New("lease holder: " + out.String())
				}
				done <- err
			}()
			<-started
			out, err := d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			require.NoError(t, err)
			assert.Equal(t, dedup.InFlight, out)
			close(finish)
			require.NoError(t, recv(t, done))
			out, err = d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
			assert.Zero(t, fx.count(t, id))
		})
	})

	// fn takes longer than the lease. Inside the transaction no other
	// delivery can take the id (it waits on the key's row), so the
	// completion must still be recorded rather than refused.
	t.Run("OutlivesLease", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			lease := leaseFor(subj)
			d := newDeduper(t, subj.Store, idem.WithLease(lease))
			const id = "evt_tx_slow"
			out, err := d.ProcessTx(t.Context(), id, func(ctx context.Context) error {
				if err := fx.apply(ctx, id); err != nil {
					return err
				}
				advance(t, subj, lease+lease/2)
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out)
			assert.Equal(t, 1, fx.count(t, id))
			out, err = d.ProcessTx(t.Context(), id, func(ctx context.Context) error { return fx.apply(ctx, id) })
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
		})
	})

	// ProcessTx and Process share records: an id processed in a transaction
	// is a Duplicate for Process, and the other way round.
	t.Run("SharedWithProcess", func(t *testing.T) {
		forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
			d := newDeduper(t, subj.Store)
			out, err := d.ProcessTx(t.Context(), "evt_a", func(ctx context.Context) error { return fx.apply(ctx, "evt_a") })
			require.NoError(t, err)
			require.Equal(t, dedup.Processed, out)
			out, err = d.Process(t.Context(), "evt_a", func(context.Context) error { return errors.New("must not run") })
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)

			out, err = d.Process(t.Context(), "evt_b", func(context.Context) error { return nil })
			require.NoError(t, err)
			require.Equal(t, dedup.Processed, out)
			out, err = d.ProcessTx(t.Context(), "evt_b", func(ctx context.Context) error { return fx.apply(ctx, "evt_b") })
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
			assert.Zero(t, fx.count(t, "evt_b"))
		})
	})
}

// TestProcessAndProcessTxOneEngine: one engine, one Deduper, both modes:
// the mode is chosen per call, and a key processed in one is a duplicate
// in the other.
func TestProcessAndProcessTxOneEngine(t *testing.T) {
	forEachTx(t, func(t *testing.T, subj storetest.Subject, fx txEffect) {
		e, err := idem.New(subj.Store, idem.WithWait(0))
		require.NoError(t, err)
		d, err := dedup.New(e)
		require.NoError(t, err)
		out, err := d.Process(t.Context(), "evt_lease", func(context.Context) error { return nil })
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out, "Process: lease mode")
		out, err = d.ProcessTx(t.Context(), "evt_tx", func(ctx context.Context) error { return fx.apply(ctx, "evt_tx") })
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out, "ProcessTx: the store's transaction, on the same engine")
		assert.Equal(t, 1, fx.count(t, "evt_tx"))
		out, err = d.ProcessTx(t.Context(), "evt_lease", func(context.Context) error { t.Error("ran twice"); return nil })
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
	})
}
