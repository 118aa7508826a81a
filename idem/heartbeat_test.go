package idem_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
)

// A work that ends before half the lease runs without a heartbeat
// goroutine: the renewal loop starts only when the first renewal is due.
func TestShortWorkStartsNoHeartbeat(t *testing.T) {
	e := newEngine(t, newMemory(t), idem.WithLease(time.Minute), idem.WithWait(0))
	loops := idem.HeartbeatLoops()
	for i := range 50 {
		before := runtime.NumGoroutine()
		var during int
		res, err := e.Run(t.Context(), key(t)+string(rune('a'+i%26)), "", func(context.Context) idem.Verdict {
			during = runtime.NumGoroutine()
			return idem.Keep([]byte("ok"))
		})
		require.NoError(t, err)
		require.Equal(t, idem.SettleCompleted, res.Settle)
		// Goroutines of earlier tests may still be ending, never starting.
		require.LessOrEqual(t, during, before, "run %d: a goroutine started for a short work", i)
		require.LessOrEqual(t, runtime.NumGoroutine(), before, "run %d: a goroutine outlived the run", i)
	}
	assert.Equal(t, loops, idem.HeartbeatLoops(), "a renewal loop started for a work shorter than half the lease")
}

// A work longer than half the lease starts the renewal loop, which renews
// it (the package's TestMain checks that no goroutine outlives the tests).
func TestLongWorkStartsHeartbeat(t *testing.T) {
	const lease = 100 * time.Millisecond
	renewed := make(chan struct{}, 16)
	e := newEngine(t, newMemory(t), idem.WithLease(lease), idem.WithWait(0), idem.WithTracer(events(func(ev idem.Event) {
		if ev.Kind == idem.Renewed {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	})))
	loops := idem.HeartbeatLoops()
	res, err := e.Run(t.Context(), key(t), "", func(ctx context.Context) idem.Verdict {
		for range 3 { // three renewals: the loop goes on after the first
			select {
			case <-renewed:
			case <-time.After(10 * lease):
				t.Error("no renewal within ten leases")
				return idem.Discard("no renewal")
			}
		}
		require.NoError(t, ctx.Err(), "the lease holds")
		return idem.Keep(nil)
	})
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	assert.Equal(t, loops+1, idem.HeartbeatLoops(), "one renewal loop for one long work")
}
