package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestClaimRaceFreshKeys races 64 goroutines, each with its own token, on
// each of many fresh keys: exactly one acquires each key, every other one
// sees InProgress (or Completed once the winner finished), none errs and
// none gets an empty answer from the snapshot race.
func TestClaimRaceFreshKeys(t *testing.T) {
	const goroutines, keys = 64, 30
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	before := s.stats.rereads.Load()
	for k := range keys {
		key := fmt.Sprintf("race-%d", k)
		completeWinner := k%2 == 1 // half the keys: the winner completes at once
		start := make(chan struct{})
		outcomes := make([]store.Outcome, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				tok := store.NewToken()
				c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
				outcomes[g], errs[g] = c.Outcome, err
				if err == nil && c.Outcome == store.Acquired && completeWinner {
					errs[g] = s.Complete(ctx, key, tok, []byte("done"), time.Hour)
				}
				if err == nil && c.Outcome == store.Completed {
					if !assert.Equal(t, []byte("done"), c.Record.Response) {
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		acquired := 0
		for g := range goroutines {
			require.NoError(t, errs[g], "key %s goroutine %d", key, g)
			switch outcomes[g] {
			case store.Acquired:
				acquired++
			case store.InProgress:
			case store.Completed:
				require.True(t, completeWinner, "Completed on a key nobody completed")
			default:
				t.Fatalf("key %s goroutine %d: outcome %v", key, g, outcomes[g])
			}
		}
		require.Equal(t, 1, acquired, "key %s: exactly one Claim acquires", key)
	}
	t.Logf("%d claims found a row committed after their snapshot and re-read it", s.stats.rereads.Load()-before)
}

// TestClaimRaceLapsedKey races goroutines to take over one lapsed lease:
// the conditional UPDATE lets exactly one of them win.
func TestClaimRaceLapsedKey(t *testing.T) {
	const goroutines, rounds = 32, 10
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	for r := range rounds {
		key := fmt.Sprintf("lapsed-%d", r)
		c, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Microsecond)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		start := make(chan struct{})
		var mu sync.Mutex
		count := map[store.Outcome]int{}
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
				assert.NoError(t, err)
				mu.Lock()
				count[c.Outcome]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, 1, count[store.Acquired], "round %d: %v", r, count)
		require.Equal(t, goroutines-1, count[store.InProgress], "round %d: %v", r, count)
	}
}

func TestClaimOutcomes(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	a, b := store.NewToken(), store.NewToken()

	c, err := s.Claim(ctx, "k", "fp", a, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.Equal(t, store.StatusInProgress, c.Record.Status)
	require.Equal(t, a, c.Record.Token)
	require.WithinDuration(t, time.Now().Add(time.Minute), c.Record.LockedUntil, 2*time.Second)
	require.Equal(t, c.Record.LockedUntil, c.Record.ExpiresAt)
	first := c.Record.LockedUntil

	c, err = s.Claim(ctx, "k", "fp", a, time.Hour) // renew
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.True(t, c.Record.LockedUntil.After(first.Add(50*time.Minute)), "lease renewed to an hour")

	c, err = s.Claim(ctx, "k", "fp", b, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.InProgress, c.Outcome)
	require.Equal(t, a, c.Record.Token)

	c, err = s.Claim(ctx, "k", "other", b, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Mismatch, c.Outcome)

	require.ErrorIs(t, s.Complete(ctx, "k", b, []byte("x"), time.Hour), store.ErrLeaseLost)
	require.NoError(t, s.Complete(ctx, "k", a, []byte("resp"), time.Hour))
	require.NoError(t, s.Complete(ctx, "k", a, []byte("resp2"), time.Hour), "a retried Complete succeeds")
	// ... and keeps the first response: a duplicate may have replayed it.

	c, err = s.Claim(ctx, "k", "fp", b, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	require.Equal(t, []byte("resp"), c.Record.Response)
	require.Equal(t, store.StatusCompleted, c.Record.Status)
	require.True(t, c.Record.LockedUntil.IsZero())

	require.NoError(t, s.Release(ctx, "k", a), "Release never deletes a completed record")
	rec, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("resp"), rec.Response)

	_, err = s.Get(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotFound)

	// An empty response stays a completed record with an empty response.
	_, err = s.Claim(ctx, "empty", "", a, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "empty", a, nil, time.Hour))
	c, err = s.Claim(ctx, "empty", "", b, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	require.NotNil(t, c.Record.Response)
	require.Empty(t, c.Record.Response)
}

func TestInvalidArgumentsWriteNothing(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	tok := store.NewToken()
	_, err := s.Claim(ctx, "", "fp", tok, time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.Claim(ctx, "k", "fp", "", time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.Claim(ctx, "k", "fp", tok, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.Claim(ctx, "k\x00", "fp", tok, time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorIs(t, s.Complete(ctx, "k", tok, nil, -time.Second), store.ErrInvalid)
	require.ErrorIs(t, s.Release(ctx, "", tok), store.ErrInvalid)
	_, err = s.Get(ctx, "")
	require.ErrorIs(t, err, store.ErrInvalid)
	var n int
	require.NoError(t, testPool(t).QueryRow(ctx, "SELECT count(*) FROM "+s.Table()).Scan(&n))
	require.Zero(t, n)
}

func TestCancelledContext(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tok := store.NewToken()
	_, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.Complete(ctx, "k", tok, nil, time.Hour), context.Canceled)
	require.ErrorIs(t, s.Release(ctx, "k", tok), context.Canceled)
	_, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Purge(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.InTx(ctx, func(context.Context, store.Store) error { return nil }), context.Canceled)
	require.ErrorIs(t, s.Migrate(ctx), context.Canceled)
}

// TestCancelWhileBlocked: a Claim blocked on a row another transaction
// inserted returns promptly when its context ends, with the context's error.
func TestCancelWhileBlocked(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	holding := make(chan struct{})
	finish := make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- s.InTx(context.Background(), func(ctx context.Context, ts store.Store) error {
			if _, err := ts.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); err != nil {
				return err
			}
			close(holding)
			<-finish
			return errors.New("roll back")
		})
	}()
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	elapsed := time.Since(began)
	close(finish)
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, elapsed, 5*time.Second)
	require.EqualError(t, <-txDone, "roll back")
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		us int64
	}{
		{time.Nanosecond, 1},
		{time.Microsecond, 1},
		{time.Microsecond + time.Nanosecond, 2},
		{1500 * time.Millisecond, 1_500_000},
		{24 * time.Hour, 86_400_000_000},
		{time.Duration(1<<63 - 1), (1<<63-1)/1000 + 1},
	} {
		iv := interval(tc.d)
		require.True(t, iv.Valid)
		require.Equal(t, tc.us, iv.Microseconds, "%v", tc.d)
		require.Zero(t, iv.Days)
		require.Zero(t, iv.Months)
	}
}

// TestDurationsExact: the server adds the lease to its own clock without
// losing precision, for short and for very long durations.
func TestDurationsExact(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	for _, d := range []time.Duration{time.Microsecond, 1234567 * time.Microsecond, 100 * 365 * 24 * time.Hour} {
		var got time.Duration
		var ok bool
		require.NoError(t, pool.QueryRow(ctx,
			"SELECT ($1::timestamptz + $2::interval) - $1::timestamptz = $2::interval, extract(epoch FROM $2::interval) * 1000000",
			time.Unix(1_700_000_000, 123456000), interval(d)).Scan(&ok, new(float64)))
		require.True(t, ok, "%v", d)
		var us int64
		require.NoError(t, pool.QueryRow(ctx,
			"SELECT (extract(epoch FROM ($1::timestamptz + $2::interval) - $1::timestamptz) * 1000000)::bigint",
			time.Unix(1_700_000_000, 0), interval(d)).Scan(&us))
		got = time.Duration(us) * time.Microsecond
		require.Equal(t, d, got)
	}
}
