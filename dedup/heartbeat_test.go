package dedup_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// TestHeartbeatRealTicker runs the real heartbeat ticker in a synctest bubble
// (fake time): fn runs for six leases; redeliveries every half lease all see
// InFlight; afterwards the id is processed once and no goroutine is left
// (synctest.Test fails if one is).
func TestHeartbeatRealTicker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRealClockStore(t)
		const lease = 10 * time.Second
		fx := newEffects()
		slow := newDeduper(t, s, idem.WithLease(lease))
		other := newDeduper(t, s, idem.WithLease(lease))
		const id = "evt_real_ticker"

		done := make(chan error, 1)
		go func() {
			out, err := slow.Process(t.Context(), id, func(ctx context.Context) error {
				time.Sleep(6 * lease)
				fx.apply(id)
				return ctx.Err()
			})
			if err == nil && out != dedup.Processed {
				err = assert.AnError
			}
			done <- err
		}()
		synctest.Wait() // slow has claimed and sleeps in fn
		for range 11 {
			time.Sleep(lease / 2)
			out, err := other.Process(t.Context(), id, fx.fn(id))
			require.NoError(t, err)
			require.Equal(t, dedup.InFlight, out)
			rec, err := s.Get(t.Context(), keyOf(slow, id))
			require.NoError(t, err)
			assert.True(t, rec.LockedUntil.After(time.Now().Add(lease/3)), "lease renewed ahead of now")
		}
		require.NoError(t, <-done)
		out, err := other.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

// newRealClockStore returns a memory store on the process clock (fake time
// inside a synctest bubble).
func newRealClockStore(t *testing.T) store.Store {
	t.Helper()
	s := mustMemory(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}
