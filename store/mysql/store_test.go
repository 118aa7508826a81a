package mysql

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestKeysByteExact: keys and fingerprints that a case-insensitive or PAD
// SPACE collation would fold together, or a short column would truncate to
// the same prefix, stay distinct records.
func TestKeysByteExact(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	long := strings.Repeat("é", store.MaxKeyLen/2) // 1024 bytes, 512 characters
	keys := []string{
		"a", "A", "a ", "a  ", " a", "á", "a\u0301", "ß", "ss", "I", "ı",
		long, long[:len(long)-2] + "ee", strings.Repeat("x", store.MaxKeyLen),
		strings.Repeat("x", store.MaxKeyLen-1) + "y",
	}
	toks := map[string]store.Token{}
	for _, k := range keys {
		tok := store.NewToken()
		c, err := s.Claim(ctx, k, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome, "key %q collided with an earlier one", k)
		toks[k] = tok
	}
	for _, k := range keys {
		r, err := s.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, toks[k], r.Token, "key %q", k)
		assert.Equal(t, k, r.Key)
	}
	// Fingerprints too: "fp" and "FP " are different requests.
	for _, fp := range []string{"FP", "fp ", "fp\u00a0"} {
		c, err := s.Claim(ctx, "a", fp, store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Mismatch, c.Outcome, "fingerprint %q", fp)
	}
	// One byte over the limit is refused before anything is written.
	_, err := s.Claim(ctx, strings.Repeat("x", store.MaxKeyLen+1), "fp", store.NewToken(), time.Minute)
	assert.ErrorIs(t, err, store.ErrInvalid)
}

// TestServerClockIgnoresSessionTimeZone: the lease's end comes from the
// server's UTC clock whatever the session's time_zone, so two pools whose
// sessions are 14 hours apart agree on it, and it is near this process's now.
func TestServerClockIgnoresSessionTimeZone(t *testing.T) {
	table := uniqueName("idemkit_my_")
	var stores []*Store
	for _, tz := range []string{"'-09:00'", "'+05:00'", "SYSTEM"} {
		db := openDB(t, 2, func(c *dsnConfig) { c.Params["time_zone"] = tz; c.ParseTime = true })
		s, err := New(db, WithTable(table))
		require.NoError(t, err)
		require.NoError(t, s.Migrate(t.Context()))
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	dropOnCleanup(t, stores[0])
	ctx := t.Context()
	tok := store.NewToken()
	before := time.Now()
	c, err := stores[0].Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.WithinDuration(t, before.Add(time.Minute), c.Record.LockedUntil, 2*time.Second)
	for _, s := range stores[1:] {
		r, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.True(t, r.LockedUntil.Equal(c.Record.LockedUntil), "another time_zone reads %v, want %v", r.LockedUntil, c.Record.LockedUntil)
		c2, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.InProgress, c2.Outcome, "a session in another time_zone must still see the lease live")
	}
	// Microseconds: a renewal 1ms later is visibly later.
	c3, err := stores[1].Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c3.Outcome)
	assert.True(t, c3.Record.LockedUntil.After(c.Record.LockedUntil))
	assert.NotZero(t, c3.Record.LockedUntil.Nanosecond()%int(time.Millisecond), "expiry has sub-millisecond precision (rarely a whole millisecond; rerun)")
}

// TestAffectedRowsFlag: with and without clientFoundRows, Complete and the
// lease's renewal tell success from a lost lease.
func TestAffectedRowsFlag(t *testing.T) {
	for _, found := range []bool{false, true} {
		t.Run(map[bool]string{false: "changed", true: "clientFoundRows"}[found], func(t *testing.T) {
			db := openDB(t, 4, func(c *dsnConfig) { c.ClientFoundRows = found })
			s := newTestStore(t, db)
			ctx := t.Context()
			tok := store.NewToken()
			first, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
			require.NoError(t, err)
			again, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, store.Acquired, again.Outcome)
			assert.True(t, again.Record.LockedUntil.After(first.Record.LockedUntil))
			require.NoError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Hour))
			require.NoError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Hour), "a retried Complete with the same response")
			assert.ErrorIs(t, s.Complete(ctx, "k", store.NewToken(), []byte("r"), time.Hour), store.ErrLeaseLost)
			assert.ErrorIs(t, s.Complete(ctx, "absent", tok, []byte("r"), time.Hour), store.ErrLeaseLost)
		})
	}
}

// trxRowsModified returns how many rows the transaction of ctx's connection
// has modified so far, as InnoDB counts them.
func trxRowsModified(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	tx, ok := TxFrom(ctx)
	require.True(t, ok)
	// INNODB_TRX is a snapshot the server refreshes when it is more than
	// 100ms old: let it age (the server's clock is the subject here).
	time.Sleep(150 * time.Millisecond)
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(trx_rows_modified), 0) FROM information_schema.INNODB_TRX
		WHERE trx_mysql_thread_id = CONNECTION_ID()`).Scan(&n)
	require.NoError(t, err)
	return n
}

// TestReplayWritesNothing: in a transaction, InnoDB counts one modified row
// for a claim that acquires, and none for a replay, an InProgress or a
// Mismatch.
func TestReplayWritesNothing(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	done := store.NewToken()
	_, err := s.Claim(ctx, "done", "fp", done, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "done", done, []byte("r"), time.Hour))
	_, err = s.Claim(ctx, "busy", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	cases := []struct {
		key, fp string
		want    store.Outcome
		rows    int64
	}{
		{"done", "fp", store.Completed, 0},
		{"busy", "fp", store.InProgress, 0},
		{"done", "other", store.Mismatch, 0},
		{"new", "fp", store.Acquired, 1},
	}
	for _, c := range cases {
		err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			got, err := st.Claim(ctx, c.key, c.fp, store.NewToken(), time.Minute)
			require.NoError(t, err)
			assert.Equal(t, c.want, got.Outcome)
			assert.Equal(t, c.rows, trxRowsModified(t, ctx), "rows modified by a claim that found %v", c.want)
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
	}
}

// TestDeadlockRunsTransactionAgain builds a real deadlock: two transactions
// each claim one key, then each claims the other's. InnoDB rolls one of them
// back whole; InTx runs it again, and it replays what the other committed.
func TestDeadlockRunsTransactionAgain(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	var (
		both     sync.WaitGroup
		attempts [2]int
		outcomes [2][]store.Outcome
	)
	both.Add(2)
	holding := make(chan struct{}, 2)
	waiting := make(chan struct{})
	keys := [2]string{"k0", "k1"}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			errs[i] = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
				attempts[i]++
				first := attempts[i] == 1
				tok := store.NewToken()
				c, err := st.Claim(ctx, keys[i], "fp", tok, time.Minute)
				if err != nil {
					return err
				}
				outcomes[i] = append(outcomes[i], c.Outcome)
				if first {
					holding <- struct{}{}
					both.Done()
					both.Wait() // each holds its own key now
					if i == 1 {
						<-waiting // transaction 0 waits for k1: now close the cycle
					}
				}
				c2, err := st.Claim(ctx, keys[1-i], "fp", tok, time.Minute)
				if err != nil {
					return err
				}
				outcomes[i] = append(outcomes[i], c2.Outcome)
				for _, k := range []string{keys[i], keys[1-i]} {
					if err := st.Complete(ctx, k, tok, []byte("by "+string(rune('0'+i))), time.Hour); err != nil &&
						!errors.Is(err, store.ErrLeaseLost) {
						return err
					}
				}
				return nil
			})
		})
	}
	<-holding
	<-holding
	waitBlocked(t, s.Table()) // transaction 0 waits for k1
	close(waiting)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.EqualValues(t, 1, s.stats.txRetries.Load(), "transactions run again")
	assert.Equal(t, 3, attempts[0]+attempts[1], "one transaction ran twice")
	t.Logf("outcomes %v", outcomes)
}

// TestDeadlockStopsTheTransaction: after a deadlock error the bound Store
// refuses further calls (they would run outside any transaction), and when
// fn swallows the error InTx does not report a commit.
func TestDeadlockStopsTheTransaction(t *testing.T) {
	s := newTestStore(t, testDB(t))
	dl := &gomysql.MySQLError{Number: errDeadlock, Message: "Deadlock found when trying to get lock"}
	calls := 0
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		calls++
		stateFrom(ctx).abort(dl) // as the runner does when the server reports 1213
		_, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		assert.ErrorIs(t, err, dl)
		return nil
	})
	assert.True(t, IsDeadlock(err), "InTx: %v", err)
	assert.Equal(t, maxTxAttempts, calls, "a deadlock every time: InTx gives up after %d attempts", maxTxAttempts)
	_, err = s.Get(t.Context(), "k")
	assert.ErrorIs(t, err, store.ErrNotFound)
}
