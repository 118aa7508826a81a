package dedup_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

// TestCompleteRetriedWhileLeaseHolds: Complete fails for longer than the
// old 60 ms budget; it is retried while the lease holds, and the
// redelivery is a Duplicate, never a second run.
func TestCompleteRetriedWhileLeaseHolds(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		fs := newFaulty(subj.Store)
		d := newDeduper(t, fs)
		const id = "evt_complete_blip"
		fs.failNext("complete", 6) // about 300 ms of failures with the engine's backoff
		out, err := d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)
		assert.Equal(t, 7, fs.count("complete"))
		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

// TestCompleteSurvivesStoreRestart: the store (miniredis) goes down between
// fn and the record and comes back a second later.
func TestCompleteSurvivesStoreRestart(t *testing.T) {
	mr := miniredis.RunT(t)
	c := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	s := mustRedis(t, c, redis.WithEvictionCheck(false))
	d := newDeduper(t, s, idem.WithLease(3*time.Second))
	fx := newEffects()
	const id = "evt_restart"
	back := make(chan struct{})
	out, err := d.Process(t.Context(), id, func(ctx context.Context) error {
		fx.apply(id)
		mr.Close()
		go func() {
			defer close(back)
			time.Sleep(time.Second) // the outage's length is the subject
			assert.NoError(t, mr.Restart())
		}()
		return nil
	})
	<-back
	require.NoError(t, err)
	assert.Equal(t, dedup.Processed, out)
	out, err = d.Process(t.Context(), id, fx.fn(id))
	require.NoError(t, err)
	assert.Equal(t, dedup.Duplicate, out)
	assert.Equal(t, 1, fx.count(id))
}

// TestRenewalOutlivesCallerCancel: the caller's context is cancelled while
// fn goes on (it ignores its context) for three leases. Renewal must not
// stop, so a redelivery meanwhile is InFlight, never a concurrent run.
func TestRenewalOutlivesCallerCancel(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		realClockOnly(t, subj)
		// Long enough that a claim on a loaded machine (CI runs packages in
		// parallel on two cores) stays well under half of it.
		const lease = 500 * time.Millisecond
		fx := newEffects()
		d := newDeduper(t, subj.Store, idem.WithLease(lease))
		const id = "evt_cancel_renew"
		ctx, cancel := context.WithCancel(t.Context())
		out, err := d.Process(ctx, id, func(fnCtx context.Context) error {
			cancel()
			<-fnCtx.Done()
			for range 3 {
				time.Sleep(lease) // the real clock is the subject
				o, err := d.Process(t.Context(), id, fx.fn(id))
				require.NoError(t, err)
				assert.Equal(t, dedup.InFlight, o, "a redelivery while fn runs")
			}
			fx.apply(id)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

// TestSlowClaimNotActedOn: a claim whose reply came after half the lease
// does not run fn.
func TestSlowClaimNotActedOn(t *testing.T) {
	const lease = 100 * time.Millisecond
	hs := &slowClaims{Store: backends[0].new(t).Store, delay: lease / 2}
	d := newDeduper(t, hs, idem.WithLease(lease))
	fx := newEffects()
	out, err := d.Process(t.Context(), "evt_slow_claim", fx.fn("evt_slow_claim"))
	assert.Equal(t, dedup.Failed, out)
	require.ErrorIs(t, err, idem.ErrSlowClaim)
	assert.Zero(t, fx.count("evt_slow_claim"))
	_, err = hs.Get(t.Context(), keyOf(d, "evt_slow_claim"))
	require.ErrorIs(t, err, store.ErrNotFound, "released")
}

type slowClaims struct {
	store.Store
	delay time.Duration
	n     atomic.Int32
}

func (s *slowClaims) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	if s.n.Add(1) == 1 {
		time.Sleep(s.delay) // a slow reply is the subject
	}
	return s.Store.Claim(ctx, key, fp, tok, lease)
}

// TestProcessWithFingerprint: a redelivery with another payload is reported
// as Mismatch, not skipped as a Duplicate; without fingerprints the id alone
// decides (the default).
func TestProcessWithFingerprint(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		d := newDeduper(t, subj.Store)
		const id = "evt_payload"
		out, err := d.ProcessWith(t.Context(), id, dedup.Fingerprint([]byte(`{"amount":1990}`)), fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)
		out, err = d.ProcessWith(t.Context(), id, dedup.Fingerprint([]byte(`{"amount":1990}`)), fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		out, err = d.ProcessWith(t.Context(), id, dedup.Fingerprint([]byte(`{"amount":9999}`)), fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Mismatch, out)
		assert.Equal(t, dedup.DeadLetter, out.Action(), "a Mismatch reaches the dead-letter outcome, never a redelivery loop")
		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out, "without a fingerprint, the id alone decides")
		assert.Equal(t, 1, fx.count(id))

		_, err = d.ProcessWith(t.Context(), id, "", fx.fn(id))
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}
