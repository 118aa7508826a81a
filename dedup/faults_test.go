package dedup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

var errBackend = errors.New("backend unreachable")

// faultyStore wraps a real store and makes chosen calls fail as a broken
// backend would, with an error that wraps no sentinel.
type faultyStore struct {
	store.Store
	mu    sync.Mutex
	fail  map[string]int // method → how many of its next calls fail
	calls map[string]int
}

func newFaulty(s store.Store) *faultyStore {
	return &faultyStore{Store: s, fail: map[string]int{}, calls: map[string]int{}}
}

func (f *faultyStore) failNext(method string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = n
}

func (f *faultyStore) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *faultyStore) take(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if f.fail[method] > 0 {
		f.fail[method]--
		return fmt.Errorf("faulty: %s: %w", method, errBackend)
	}
	return nil
}

func (f *faultyStore) Claim(ctx context.Context, key, fp string, t store.Token, lease time.Duration) (store.Claim, error) {
	if err := f.take("claim"); err != nil {
		return store.Claim{}, err
	}
	return f.Store.Claim(ctx, key, fp, t, lease)
}

func (f *faultyStore) Complete(ctx context.Context, key string, t store.Token, resp []byte, ret time.Duration) error {
	if err := f.take("complete"); err != nil {
		return err
	}
	return f.Store.Complete(ctx, key, t, resp, ret)
}

func (f *faultyStore) Renew(ctx context.Context, key string, t store.Token, lease time.Duration) error {
	if err := f.take("renew"); err != nil {
		return err
	}
	return f.Store.Renew(ctx, key, t, lease)
}

func (f *faultyStore) Release(ctx context.Context, key string, t store.Token) error {
	if err := f.take("release"); err != nil {
		return err
	}
	return f.Store.Release(ctx, key, t)
}

func assertBackendError(t *testing.T, err error) {
	t.Helper()
	assert.ErrorIs(t, err, errBackend)
	for _, sentinel := range []error{store.ErrNotFound, store.ErrLeaseLost, store.ErrInvalid} {
		assert.NotErrorIs(t, err, sentinel, "a backend failure is not a sentinel")
	}
}

func TestStoreFailures(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		t.Run("Claim", func(t *testing.T) {
			fx := newEffects()
			fs := newFaulty(subj.Store)
			d := newDeduper(t, fs)
			fs.failNext("claim", 1)
			out, err := d.Process(t.Context(), "evt_claim_fails", fx.fn("evt_claim_fails"))
			assert.Equal(t, dedup.Failed, out)
			assertBackendError(t, err)
			assert.Contains(t, err.Error(), `dedup: claim "`+keyer.DefaultRedactor()("evt_claim_fails")+`"`)
			assert.Zero(t, fx.count("evt_claim_fails"), "fn not called")
		})

		t.Run("CompleteRetried", func(t *testing.T) {
			fx := newEffects()
			fs := newFaulty(subj.Store)
			d := newDeduper(t, fs)
			fs.failNext("complete", 2)
			out, err := d.Process(t.Context(), "evt_complete_retried", fx.fn("evt_complete_retried"))
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out)
			assert.Equal(t, 3, fs.count("complete"))
			out, err = d.Process(t.Context(), "evt_complete_retried", fx.fn("evt_complete_retried"))
			require.NoError(t, err)
			assert.Equal(t, dedup.Duplicate, out)
		})

		t.Run("CompleteFails", func(t *testing.T) {
			fx := newEffects()
			fs := newFaulty(subj.Store)
			d := newDeduper(t, fs, idem.WithLease(100*time.Millisecond))
			const id = "evt_complete_fails"
			fs.failNext("complete", 1000)
			out, err := d.Process(t.Context(), id, fx.fn(id))
			assert.Equal(t, dedup.Failed, out)
			assertBackendError(t, err)
			assert.Contains(t, err.Error(), `dedup: complete "`+keyer.DefaultRedactor()(id)+`"`)
			assert.Greater(t, fs.count("complete"), 3, "Complete was retried while the lease held")
			if subj.Clock != nil {
				// The claim stays until its lease lapses: a redelivery
				// meanwhile is InFlight, not run a second time.
				out, err = d.Process(t.Context(), id, fx.fn(id))
				require.NoError(t, err)
				assert.Equal(t, dedup.InFlight, out)
				assert.Equal(t, 1, fx.count(id))
			}
		})

		t.Run("ReleaseFails", func(t *testing.T) {
			fs := newFaulty(subj.Store)
			d := newDeduper(t, fs)
			fs.failNext("release", 3) // every attempt of the engine's release
			boom := errors.New("handler failed")
			out, err := d.Process(t.Context(), "evt_release_fails", func(context.Context) error { return boom })
			assert.Equal(t, dedup.Failed, out)
			assert.ErrorIs(t, err, boom)
			assert.ErrorIs(t, err, errBackend)
		})

		t.Run("RenewalFails", func(t *testing.T) {
			fx := newEffects()
			fs := newFaulty(subj.Store)
			const lease = 200 * time.Millisecond
			d := newDeduper(t, fs, idem.WithLease(lease))
			const id = "evt_renewal_fails"
			out, err := d.Process(t.Context(), id, func(ctx context.Context) error {
				fs.failNext("renew", 1) // the next renewal fails; the one after works
				time.Sleep(2 * lease)   // the real clock is the subject
				fx.apply(id)
				return ctx.Err()
			})
			require.NoError(t, err)
			assert.Equal(t, dedup.Processed, out)
			assert.Equal(t, 1, fs.count("claim"), "renewals are no claims")
			assert.GreaterOrEqual(t, fs.count("renew"), 2, "the failed renewal, a good one")
		})
	})
}

// TestLapsedButUnclaimed: fn outlives its lease without a renewal, but no
// other delivery claimed the id meanwhile: the completion is still recorded.
func TestLapsedButUnclaimed(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		fx := newEffects()
		lease := leaseFor(subj)
		d := newDeduper(t, subj.Store, idem.WithLease(lease))
		const id = "evt_lapsed_unclaimed"
		out, err := d.Process(t.Context(), id, func(ctx context.Context) error {
			advance(t, subj, lease+lease/2)
			fx.apply(id)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, dedup.Processed, out)
		out, err = d.Process(t.Context(), id, fx.fn(id))
		require.NoError(t, err)
		assert.Equal(t, dedup.Duplicate, out)
		assert.Equal(t, 1, fx.count(id))
	})
}

func TestLogger(t *testing.T) {
	b := backends[0]
	subj := b.new(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fs := newFaulty(subj.Store)
	d := newDeduper(t, fs, idem.WithLogger(logger), dedup.WithScope("queue"))
	fs.failNext("release", 3) // every attempt of the engine's release
	_, err := d.Process(t.Context(), "evt_logged", func(context.Context) error { return errors.New("no") })
	require.Error(t, err)
	mu.Lock()
	defer mu.Unlock()
	line := buf.String()
	assert.Contains(t, line, "level=ERROR")
	assert.Contains(t, line, "dedup: release failed")
	assert.Contains(t, line, "id="+keyer.DefaultRedactor()("evt_logged"), "the id, redacted")
	assert.Contains(t, line, "scope="+keyer.DefaultRedactor()("queue"), "the scope, redacted")
	assert.NotContains(t, line, "evt_logged")
	assert.True(t, strings.Contains(line, "backend unreachable"), line)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestStoreCallsPerDelivery: dedup adds no store round trip to the minimum:
// a new id costs a Claim and a Complete, a duplicate one Claim, a failure a
// Claim and a Release (with a lease long enough that no renewal is due).
func TestStoreCallsPerDelivery(t *testing.T) {
	subj := backends[0].new(t)
	fs := newFaulty(subj.Store)
	d := newDeduper(t, fs)
	calls := func() map[string]int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		m := map[string]int{}
		for k, v := range fs.calls {
			if v > 0 {
				m[k] = v
			}
		}
		clear(fs.calls)
		return m
	}
	_, _ = d.Process(t.Context(), "evt_calls", func(context.Context) error { return nil })
	assert.Equal(t, map[string]int{"claim": 1, "complete": 1}, calls(), "new id")
	_, _ = d.Process(t.Context(), "evt_calls", func(context.Context) error { return nil })
	assert.Equal(t, map[string]int{"claim": 1}, calls(), "duplicate")
	_, _ = d.Process(t.Context(), "evt_calls_fail", func(context.Context) error { return errors.New("x") })
	assert.Equal(t, map[string]int{"claim": 1, "release": 1}, calls(), "failure")
}

// hangingStore blocks a Claim or a Renew until its context ends while hang
// is set, as a store behind a dead connection would.
type hangingStore struct {
	store.Store
	hang atomic.Bool
}

func (h *hangingStore) Claim(ctx context.Context, key, fp string, t store.Token, lease time.Duration) (store.Claim, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return store.Claim{}, fmt.Errorf("hanging: claim: %w", ctx.Err())
	}
	return h.Store.Claim(ctx, key, fp, t, lease)
}

func (h *hangingStore) Renew(ctx context.Context, key string, t store.Token, lease time.Duration) error {
	if h.hang.Load() {
		<-ctx.Done()
		return fmt.Errorf("hanging: renew: %w", ctx.Err())
	}
	return h.Store.Renew(ctx, key, t, lease)
}

// TestRenewalHangs: a renewal that hangs is abandoned after the renewal
// interval (lease/2), so it neither blocks Process nor outlives it.
func TestRenewalHangs(t *testing.T) {
	subj := backends[0].new(t)
	hs := &hangingStore{Store: subj.Store}
	const lease = 200 * time.Millisecond
	gaveUp := make(chan error, 16)
	d := newDeduper(t, hs, idem.WithLease(lease), idem.WithTracer(events(func(e idem.Event) {
		if e.Kind == idem.StoreError && e.Op == idem.OpRenew {
			gaveUp <- e.Err
		}
	})))
	out, err := d.Process(t.Context(), "evt_renewal_hangs", func(ctx context.Context) error {
		hs.hang.Store(true)
		assert.ErrorIs(t, recv(t, gaveUp), context.DeadlineExceeded, "the renewal gave up after lease/2")
		hs.hang.Store(false)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, dedup.Processed, out)
}
