package idem_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

func forEachTx(t *testing.T, test func(t *testing.T, b txBackend)) {
	for name, b := range txBackends(t) {
		t.Run(name, func(t *testing.T) { test(t, b) })
	}
}

func TestTxKeepCommits(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s)
		require.True(t, e.CanTransact())
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			if err := b.apply(ctx, k); err != nil {
				return idem.Discard(err.Error())
			}
			return idem.Keep([]byte("paid"))
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleCompleted, res.Settle)
		res, err = e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict { t.Error("ran twice"); return idem.Keep(nil) }, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, "paid", string(res.Record.Response))
		assert.Equal(t, 1, b.count(t, k))
	})
}

func TestTxDiscardRollsBack(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s)
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			require.NoError(t, b.apply(ctx, k))
			return idem.Discard("declined")
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleReleased, res.Settle)
		assert.Zero(t, b.count(t, k), "the effect rolled back with the key")
		_, err = b.s.Get(t.Context(), k)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestTxNotKeptRollsBack(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s)
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			require.NoError(t, b.apply(ctx, k))
			return idem.KeepWithoutResponse("too large")
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleReleased, res.Settle)
		assert.Zero(t, b.count(t, k))
	})
}

func TestTxPanicRollsBack(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s)
		k := key(t)
		require.PanicsWithValue(t, "boom", func() {
			_, _ = e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
				require.NoError(t, b.apply(ctx, k))
				panic("boom")
			}, idem.InTx())
		})
		assert.Zero(t, b.count(t, k))
		_, err := b.s.Get(t.Context(), k)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestTxRenewsBeforeComplete(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		const lease = 200 * time.Millisecond
		var rec recorder
		e := newEngine(t, b.s, idem.WithLease(lease), idem.WithTracer(events(rec.observe)))
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			time.Sleep(lease + 50*time.Millisecond) // past the lease: the real clock is the subject
			require.NoError(t, b.apply(ctx, k))
			return idem.Keep([]byte("slow"))
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleCompleted, res.Settle)
		assert.Equal(t, 1, rec.count(idem.Renewed))
		assert.Equal(t, 1, b.count(t, k))
	})
}

// failingTx makes InTx fail after fn returned, as a lost COMMIT would.
type failingTx struct {
	store.Store
	tx store.Transactor
}

var errCommit = errors.New("test: commit reply lost")

func (f failingTx) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	err := f.tx.InTx(ctx, func(ctx context.Context, s store.Store) error {
		if err := fn(ctx, s); err != nil {
			return err
		}
		return errCommit // rolls back; the caller cannot tell from a lost COMMIT reply
	})
	return err
}

func TestTxCommitFails(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, failingTx{Store: b.s, tx: b.s.(store.Transactor)})
		k := key(t)
		res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
			require.NoError(t, b.apply(ctx, k))
			return idem.Keep([]byte("maybe"))
		}, idem.InTx())
		require.ErrorIs(t, err, idem.ErrNotRecorded)
		require.ErrorIs(t, err, errCommit)
		assert.Equal(t, idem.SettleUnknown, res.Settle)
	})
}

func TestTxConcurrentOnce(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s, idem.WithWait(10*time.Second))
		k := key(t)
		var runs atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				res, err := e.Run(context.Background(), k, "", func(ctx context.Context) idem.Verdict {
					runs.Add(1)
					if err := b.apply(ctx, k); err != nil {
						return idem.Discard(err.Error())
					}
					return idem.Keep([]byte("once"))
				}, idem.InTx())
				assert.NoError(t, err)
				assert.Contains(t, []store.Outcome{store.Acquired, store.Completed}, res.Outcome)
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, runs.Load())
		assert.Equal(t, 1, b.count(t, k))
	})
}

func TestTxCompleteAfterLapseReclaims(t *testing.T) {
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "lapse.db"), sqlite.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	e := newEngine(t, s, idem.WithLease(time.Second))
	k := key(t)
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		clock.Advance(time.Hour) // the lease lapses by the store's clock
		return idem.Keep([]byte("late but alone"))
	}, idem.InTx())
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, r.Status)
}

// TestTxCallerLeavesAfterWorkCommits: a caller that goes away after the
// work returned does not roll it back: the commit runs on a context
// detached from the caller's, and a retry replays.
func TestTxCallerLeavesAfterWorkCommits(t *testing.T) {
	forEachTx(t, func(t *testing.T, b txBackend) {
		e := newEngine(t, b.s)
		k := key(t)
		ctx, cancel := context.WithCancel(t.Context())
		res, err := e.Run(ctx, k, "", func(wctx context.Context) idem.Verdict {
			if err := b.apply(wctx, k); err != nil {
				return idem.Discard(err.Error())
			}
			cancel() // the caller leaves after the effect, before the commit
			<-wctx.Done()
			return idem.Keep([]byte("paid"))
		}, idem.InTx())
		require.NoError(t, err)
		assert.Equal(t, idem.SettleCompleted, res.Settle)
		assert.Equal(t, 1, b.count(t, k), "the effect committed")
		res, err = e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { t.Error("ran twice"); return idem.Keep(nil) }, idem.InTx())
		require.NoError(t, err)
		assert.True(t, res.Replay())
		assert.Equal(t, "paid", string(res.Record.Response))
	})
}

// TestInTxNeedsTransactor: InTx on a store without transactions is
// store.ErrInvalid and runs nothing; InTxIfSupported runs lease mode there.
func TestInTxNeedsTransactor(t *testing.T) {
	e := newEngine(t, newMemory(t))
	_, err := e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) }, idem.InTx())
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) }, nil)
	require.ErrorIs(t, err, store.ErrInvalid, "a nil RunOption")
	var inTx bool
	res, err := e.Run(t.Context(), key(t), "", func(ctx context.Context) idem.Verdict { _, inTx = sqlite.TxFrom(ctx); return idem.Keep(nil) }, idem.InTxIfSupported())
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	assert.False(t, inTx)
}
