package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

func newTestStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "tx.db"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

// A duplicate InTx on the same Store queues behind the open transaction (the
// hook says it is waiting) and then replays what the first one committed.
func TestInTxDuplicateWaitsInQueue(t *testing.T) {
	s := newTestStore(t)
	waiting := make(chan struct{}, 1)
	s.onWait = func() { waiting <- struct{}{} }
	claimed := make(chan struct{})
	firstErr := make(chan error, 1)
	tok := store.NewToken()
	go func() {
		firstErr <- s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
			c, err := st.Claim(ctx, "k", "fp", tok, time.Minute)
			if err != nil || c.Outcome != store.Acquired {
				return errors.Join(err, errors.New("first did not acquire"))
			}
			close(claimed)
			<-waiting // the duplicate is queued behind this transaction
			return st.Complete(ctx, "k", tok, []byte("first"), time.Hour)
		})
	}()
	<-claimed
	var got store.Claim
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		var err error
		got, err = st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		return err
	})
	require.NoError(t, err)
	require.NoError(t, <-firstErr)
	assert.Equal(t, store.Completed, got.Outcome)
	assert.Equal(t, "first", string(got.Record.Response))
	assert.Equal(t, tok, got.Record.Token)
}

// Inside fn, a call on the Store (not the one passed to fn) with fn's context
// runs in the transaction: it rolls back with it, and does not deadlock on
// the Store's own queue.
func TestStoreCallsJoinTheTransaction(t *testing.T) {
	s := newTestStore(t)
	boom := errors.New("boom")
	err := s.InTx(t.Context(), func(ctx context.Context, _ store.Store) error {
		tok := store.NewToken()
		c, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
		if err != nil {
			return err
		}
		if c.Outcome != store.Acquired {
			return errors.New("not acquired")
		}
		if _, err := s.Get(ctx, "k"); err != nil {
			return err
		}
		if err := s.Complete(ctx, "k", tok, []byte("r"), time.Hour); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = s.Get(t.Context(), "k")
	assert.ErrorIs(t, err, store.ErrNotFound, "the Store's calls rolled back with the transaction")
}

// A call with a context that does not carry the transaction waits for it, at
// most the busy timeout, and says why.
func TestLockTimeout(t *testing.T) {
	s := newTestStore(t, WithBusyTimeout(50*time.Millisecond))
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		_, err := s.Claim(context.Background(), "k", "fp", store.NewToken(), time.Minute)
		return err
	})
	var lt *LockTimeoutError
	require.ErrorAs(t, err, &lt)
	assert.Equal(t, 50*time.Millisecond, lt.Wait)
	assert.ErrorContains(t, err, "sqlite: claim: ")
	assert.NotErrorIs(t, err, store.ErrLeaseLost)

	// A cancelled context ends the wait with the context's error.
	ctx, cancel := context.WithCancel(t.Context())
	err = s.InTx(t.Context(), func(context.Context, store.Store) error {
		cancel()
		_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		return err
	})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestNestedInTxIsASavepoint(t *testing.T) {
	s := newTestStore(t)
	inner := errors.New("inner failed")
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		if _, err := st.Claim(ctx, "outer", "fp", store.NewToken(), time.Minute); err != nil {
			return err
		}
		err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			if _, err := st.Claim(ctx, "inner-rolled-back", "fp", store.NewToken(), time.Minute); err != nil {
				return err
			}
			return inner
		})
		if !errors.Is(err, inner) {
			return errors.Join(errors.New("nested InTx should return fn's error"), err)
		}
		return s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			_, err := st.Claim(ctx, "inner-kept", "fp", store.NewToken(), time.Minute)
			return err
		})
	})
	require.NoError(t, err)
	for key, want := range map[string]error{"outer": nil, "inner-kept": nil, "inner-rolled-back": store.ErrNotFound} {
		_, err := s.Get(t.Context(), key)
		if want == nil {
			assert.NoError(t, err, key)
		} else {
			assert.ErrorIs(t, err, want, key)
		}
	}
}

func TestTxFrom(t *testing.T) {
	_, ok := TxFrom(t.Context())
	assert.False(t, ok, "no transaction outside InTx")
	s := newTestStore(t)
	require.NoError(t, s.InTx(t.Context(), func(ctx context.Context, _ store.Store) error {
		tx, ok := TxFrom(ctx)
		if !ok || tx == nil {
			return errors.New("TxFrom found no transaction inside InTx")
		}
		var one int
		return tx.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}))
}

func TestInTxBadInput(t *testing.T) {
	s := newTestStore(t)
	assert.ErrorIs(t, s.InTx(t.Context(), nil), store.ErrInvalid)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	err := s.InTx(ctx, func(context.Context, store.Store) error { ran = true; return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
}

// The context ending while fn runs rolls the transaction back.
func TestInTxContextEndsDuringFn(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		if _, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); err != nil {
			return err
		}
		cancel()
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Get(t.Context(), "k")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// Purge deletes in batches of the configured size and keeps live records.
func TestPurgeBatches(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	s := newTestStore(t, WithPurgeBatch(3), WithClock(clock))
	for i := range 10 {
		tok := store.NewToken()
		key := "old-" + string(rune('a'+i))
		_, err := s.Claim(t.Context(), key, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(t.Context(), key, tok, []byte("r"), time.Second))
	}
	live := store.NewToken()
	_, err := s.Claim(t.Context(), "live", "fp", live, time.Hour)
	require.NoError(t, err)
	now = now.Add(time.Minute)
	var batches []int64
	s.onPurgeBatch = func(n int64) { batches = append(batches, n) }
	n, err := s.Purge(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	assert.Equal(t, []int64{3, 3, 3, 1}, batches, "one statement per batch of at most 3")
	var left int
	require.NoError(t, s.DB().QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&left))
	assert.Equal(t, 1, left)
	_, err = s.Get(t.Context(), "live")
	assert.NoError(t, err)
}

// The purge statement uses the expiry index rather than scanning the table.
func TestPurgeUsesIndex(t *testing.T) {
	s := newTestStore(t)
	rows, err := s.DB().Query(`EXPLAIN QUERY PLAN `+s.stmts[stmtPurge].query, 0, 10, 0)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	assert.Contains(t, plan, "SEARCH idempotency_keys USING INDEX idempotency_keys_expires_at_idx (expires_at<?)", "plan: %q", plan)
}
