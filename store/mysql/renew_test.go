package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// shortLease is a lease the tests let run out on the server's clock.
const shortLease = 100 * time.Millisecond

// lapse waits until a shortLease granted before the call has run out on
// the server's clock (the server is on this machine).
func lapse() { time.Sleep(shortLease + 50*time.Millisecond) }

// eachPool runs f on the shared pool (the driver's default flags) and on a
// pool whose DSN sets clientFoundRows and interpolateParams, READ
// COMMITTED, and a non-strict sql_mode with ANSI_QUOTES (and, on MariaDB,
// SIMULTANEOUS_ASSIGNMENT, under which an UPDATE's assignments all read
// the old row): the flags that change what an UPDATE does and reports and
// how its statements travel.
func eachPool(t *testing.T, f func(t *testing.T, db *sql.DB)) {
	t.Run("default", func(t *testing.T) { f(t, testDB(t)) })
	t.Run("flags", func(t *testing.T) {
		mode := "'ANSI_QUOTES'"
		if isMariaDB(t) {
			mode = "'ANSI_QUOTES,SIMULTANEOUS_ASSIGNMENT'"
		}
		f(t, openDB(t, 8, func(c *dsnConfig) {
			c.ClientFoundRows = true
			c.InterpolateParams = true
			withIsolation(t, "READ-COMMITTED")(c)
			c.Params["sql_mode"] = mode
		}))
	})
}

// lookup returns the Inspector's entry for key, which sees lapsed and
// expired records too.
func lookup(t *testing.T, s *Store, key string) store.Entry {
	t.Helper()
	e, err := s.Lookup(t.Context(), key)
	require.NoError(t, err, "lookup %q", key)
	return e
}

// claimed claims key for tok and requires Acquired.
func claimed(t *testing.T, s store.Store, key string, tok store.Token, lease time.Duration) store.Record {
	t.Helper()
	c, err := s.Claim(t.Context(), key, "fp", tok, lease)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome, "claim %q", key)
	return c.Record
}

// sameAsStored requires that the Attempt and Fence a Claim reported are
// those the row holds: the Store works them out without reading them back.
func sameAsStored(t *testing.T, s *Store, r store.Record) {
	t.Helper()
	got, err := s.Get(t.Context(), r.Key)
	require.NoError(t, err)
	assert.Equal(t, r.Attempt, got.Attempt, "Get's attempt of %q", r.Key)
	assert.Equal(t, r.Fence, got.Fence, "Get's fence of %q", r.Key)
	assert.True(t, r.ExpiresAt.Equal(got.ExpiresAt), "Get's expiry of %q: %v, claim said %v", r.Key, got.ExpiresAt, r.ExpiresAt)
	e := lookup(t, s, r.Key)
	assert.Equal(t, r.Attempt, e.Attempt, "Lookup's attempt of %q", r.Key)
	assert.Equal(t, r.Fence, e.Fence, "Lookup's fence of %q", r.Key)
}

// TestRenewCases: Renew extends only a live lease held by the token; every
// other case is ErrLeaseLost and writes nothing.
func TestRenewCases(t *testing.T) {
	eachPool(t, func(t *testing.T, db *sql.DB) {
		s := newTestStore(t, db)
		ctx := t.Context()
		mine, other := store.NewToken(), store.NewToken()

		// Own live lease: extended, attempt and fence kept.
		r := claimed(t, s, "live", mine, 2*time.Second)
		require.NoError(t, s.Renew(ctx, "live", mine, time.Hour))
		got, err := s.Get(ctx, "live")
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Hour), got.LockedUntil, 5*time.Second)
		assert.Equal(t, r.Attempt, got.Attempt)
		assert.Equal(t, r.Fence, got.Fence)
		assert.Equal(t, store.InProgress, must(s.Claim(ctx, "live", "fp", other, time.Minute)).Outcome,
			"the renewed lease holds the key past its first end")
		// A renewal may shorten the lease too: it ends lease from now.
		require.NoError(t, s.Renew(ctx, "live", mine, time.Minute))
		got, err = s.Get(ctx, "live")
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Minute), got.LockedUntil, 5*time.Second)

		// Absent: never claimed.
		assert.ErrorIs(t, s.Renew(ctx, "absent", mine, time.Minute), store.ErrLeaseLost)
		_, err = s.Lookup(ctx, "absent")
		assert.ErrorIs(t, err, store.ErrNotFound, "Renew created a record")

		// Another token's live lease: refused, untouched.
		theirs := claimed(t, s, "theirs", other, time.Minute)
		assert.ErrorIs(t, s.Renew(ctx, "theirs", mine, time.Hour), store.ErrLeaseLost)
		got, err = s.Get(ctx, "theirs")
		require.NoError(t, err)
		assert.Equal(t, other, got.Token)
		assert.True(t, got.ExpiresAt.Equal(theirs.ExpiresAt), "another token's lease moved to %v", got.ExpiresAt)

		// Completed, by the same token: refused, the record unchanged.
		claimed(t, s, "done", mine, time.Minute)
		require.NoError(t, s.Complete(ctx, "done", mine, []byte("resp"), time.Hour))
		before := lookup(t, s, "done")
		assert.ErrorIs(t, s.Renew(ctx, "done", mine, time.Minute), store.ErrLeaseLost)
		assert.Equal(t, before, lookup(t, s, "done"))

		// Released: refused, the key stays absent.
		claimed(t, s, "released", mine, time.Minute)
		require.NoError(t, s.Release(ctx, "released", mine))
		assert.ErrorIs(t, s.Renew(ctx, "released", mine, time.Minute), store.ErrLeaseLost)
		_, err = s.Lookup(ctx, "released")
		assert.ErrorIs(t, err, store.ErrNotFound, "Renew revived a released key")

		// Lapsed: refused, not revived (still lapsed, same deadline).
		claimed(t, s, "lapsed", mine, shortLease)
		lapse()
		before = lookup(t, s, "lapsed")
		require.Equal(t, store.StateLapsed, before.State)
		assert.ErrorIs(t, s.Renew(ctx, "lapsed", mine, time.Hour), store.ErrLeaseLost)
		assert.Equal(t, before, lookup(t, s, "lapsed"))
		_, err = s.Get(ctx, "lapsed")
		assert.ErrorIs(t, err, store.ErrNotFound)

		// Expired completed record: refused, not revived.
		claimed(t, s, "expired", mine, time.Minute)
		require.NoError(t, s.Complete(ctx, "expired", mine, []byte("r"), time.Millisecond))
		time.Sleep(20 * time.Millisecond)
		before = lookup(t, s, "expired")
		require.Equal(t, store.StateExpired, before.State)
		assert.ErrorIs(t, s.Renew(ctx, "expired", mine, time.Hour), store.ErrLeaseLost)
		assert.Equal(t, before, lookup(t, s, "expired"))

		// Invalid arguments, and a cancelled context.
		assert.ErrorIs(t, s.Renew(ctx, "", mine, time.Minute), store.ErrInvalid)
		assert.ErrorIs(t, s.Renew(ctx, "live", "", time.Minute), store.ErrInvalid)
		assert.ErrorIs(t, s.Renew(ctx, "live", mine, 0), store.ErrInvalid)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, s.Renew(cctx, "live", mine, time.Minute), context.Canceled)
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRenewInTx: the Store InTx passes renews within the transaction: the
// renewal commits or rolls back with it, and refuses a lease it does not
// hold.
func TestRenewInTx(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	tok := store.NewToken()
	var first store.Record
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		c, err := tx.Claim(ctx, "k", "fp", tok, time.Minute)
		if err != nil {
			return err
		}
		first = c.Record
		if err := tx.Renew(ctx, "k", tok, time.Hour); err != nil {
			return err
		}
		if err := tx.Renew(ctx, "k", store.NewToken(), time.Hour); !errors.Is(err, store.ErrLeaseLost) {
			return fmt.Errorf("another token's Renew in the tx = %v, want ErrLeaseLost", err)
		}
		if err := tx.Renew(ctx, "none", tok, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
			return fmt.Errorf("Renew of an absent key in the tx = %v, want ErrLeaseLost", err)
		}
		return nil
	}))
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), got.LockedUntil, 5*time.Second)
	assert.Equal(t, first.Attempt, got.Attempt)
	assert.Equal(t, first.Fence, got.Fence)

	// A renewal in a transaction that rolls back is undone.
	boom := errors.New("boom")
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.Renew(ctx, "k", tok, 24*time.Hour); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	again, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.True(t, again.LockedUntil.Equal(got.LockedUntil), "rolled back renewal left %v, want %v", again.LockedUntil, got.LockedUntil)
	// The Store's own Renew with fn's context also runs in the transaction.
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, _ store.Store) error {
		return s.Renew(ctx, "k", tok, time.Minute)
	}))
}

// TestAttemptsAndFences: each way a claim acquires a key sets Attempt and
// Fence as store.Successor says, and Claim reports what the row holds.
func TestAttemptsAndFences(t *testing.T) {
	eachPool(t, func(t *testing.T, db *sql.DB) {
		s := newTestStore(t, db)
		ctx := t.Context()
		t1, t2, t3 := store.NewToken(), store.NewToken(), store.NewToken()

		// Fresh: attempt 1, fence the server's clock in µs.
		before := time.Now()
		r1 := claimed(t, s, "k", t1, shortLease)
		assert.EqualValues(t, 1, r1.Attempt)
		assert.InDelta(t, float64(before.UnixMicro()), float64(r1.Fence), float64(5*time.Second/time.Microsecond))
		sameAsStored(t, s, r1)

		// Re-entrant: both kept, lease renewed.
		again := claimed(t, s, "k", t1, shortLease)
		assert.Equal(t, r1.Attempt, again.Attempt)
		assert.Equal(t, r1.Fence, again.Fence)
		sameAsStored(t, s, again)

		// Takeover of the lapsed lease: attempt 2, larger fence.
		lapse()
		c, err := s.Claim(ctx, "k", "fp", t2, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		assert.True(t, c.Takeover())
		assert.EqualValues(t, 2, c.Record.Attempt)
		assert.Greater(t, c.Record.Fence, r1.Fence)
		sameAsStored(t, s, c.Record)

		// The first holder's late calls are refused and change nothing.
		assert.ErrorIs(t, s.Complete(ctx, "k", t1, []byte("late"), time.Hour), store.ErrLeaseLost)
		assert.ErrorIs(t, s.Renew(ctx, "k", t1, time.Hour), store.ErrLeaseLost)
		require.NoError(t, s.Release(ctx, "k", t1))
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, t2, got.Token)
		assert.Equal(t, store.StatusInProgress, got.Status)
		assert.Equal(t, c.Record.Attempt, got.Attempt)
		assert.Equal(t, c.Record.Fence, got.Fence)

		// The completed record keeps the attempt and fence of its claim.
		require.NoError(t, s.Complete(ctx, "k", t2, []byte("resp"), shortLease))
		got, err = s.Get(ctx, "k")
		require.NoError(t, err)
		assert.EqualValues(t, 2, got.Attempt)
		assert.Equal(t, c.Record.Fence, got.Fence)

		// Over an expired completed record: attempt 1, a larger fence.
		lapse()
		r3 := claimed(t, s, "k", t3, time.Minute)
		assert.EqualValues(t, 1, r3.Attempt)
		assert.Greater(t, r3.Fence, c.Record.Fence)
		sameAsStored(t, s, r3)

		// A third takeover in a row counts on.
		claimed(t, s, "chain", t1, shortLease)
		lapse()
		claimed(t, s, "chain", t2, shortLease)
		lapse()
		r := claimed(t, s, "chain", t3, time.Minute)
		assert.EqualValues(t, 3, r.Attempt)
		sameAsStored(t, s, r)

		// After a release the next claim counts from 1, with a fence
		// that still grows (the server's clock moved on).
		require.NoError(t, s.Release(ctx, "chain", t3))
		r4 := claimed(t, s, "chain", t1, time.Minute)
		assert.EqualValues(t, 1, r4.Attempt)
		assert.Greater(t, r4.Fence, r.Fence)
		sameAsStored(t, s, r4)
	})
}

// TestTakeoverInTx: a takeover inside a transaction sets the attempt and
// fence too, and a rollback restores the lapsed record as it was.
func TestTakeoverInTx(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	t1 := store.NewToken()
	r1 := claimed(t, s, "k", t1, shortLease)
	lapse()
	boom := errors.New("boom")
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		c, err := tx.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		if err != nil {
			return err
		}
		if c.Record.Attempt != 2 || c.Record.Fence <= r1.Fence {
			return fmt.Errorf("takeover in a tx: attempt %d fence %d, want 2 and more than %d", c.Record.Attempt, c.Record.Fence, r1.Fence)
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	e := lookup(t, s, "k")
	assert.Equal(t, store.StateLapsed, e.State)
	assert.EqualValues(t, 1, e.Attempt)
	assert.Equal(t, r1.Fence, e.Fence)
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		c, err := tx.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		if err == nil && c.Record.Attempt != 2 {
			err = fmt.Errorf("takeover in a tx: attempt %d, want 2", c.Record.Attempt)
		}
		return err
	}))
	assert.EqualValues(t, 2, lookup(t, s, "k").Attempt)
}

// TestConcurrentTakeover: of many claims of one lapsed key at once exactly
// one takes it over, with attempt 2, and reports what the row holds.
func TestConcurrentTakeover(t *testing.T) {
	db := openDB(t, 8, nil)
	s := newTestStore(t, db)
	ctx := t.Context()
	for round := range 5 {
		key := "k" + strconv.Itoa(round)
		first := claimed(t, s, key, store.NewToken(), shortLease)
		lapse()
		var wg sync.WaitGroup
		claims := make([]store.Claim, 8)
		errs := make([]error, len(claims))
		start := make(chan struct{})
		for i := range claims {
			wg.Go(func() {
				<-start
				claims[i], errs[i] = s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		var won []store.Record
		for i, c := range claims {
			require.NoError(t, errs[i])
			if c.Outcome == store.Acquired {
				won = append(won, c.Record)
			} else {
				assert.Equal(t, store.InProgress, c.Outcome)
			}
		}
		require.Len(t, won, 1, "round %d: claims that acquired the lapsed key", round)
		assert.EqualValues(t, 2, won[0].Attempt)
		assert.Greater(t, won[0].Fence, first.Fence)
		sameAsStored(t, s, won[0])
	}
}

// TestRenewAfterRelease: renewals racing the holder's Release on many keys,
// in real goroutines: every renewal either lands before the release (nil)
// or is refused (ErrLeaseLost), and none brings a released key back, so a
// new claim of each key acquires it with attempt 1.
func TestRenewAfterRelease(t *testing.T) {
	eachPool(t, func(t *testing.T, db *sql.DB) {
		s := newTestStore(t, db)
		ctx := t.Context()
		const keys, renewers = 40, 3
		toks := make([]store.Token, keys)
		for i := range toks {
			toks[i] = store.NewToken()
			claimed(t, s, "k"+strconv.Itoa(i), toks[i], time.Minute)
		}
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			ok, lost  int
			failures  []error
			startLine = make(chan struct{})
		)
		for i := range keys {
			key, tok := "k"+strconv.Itoa(i), toks[i]
			wg.Go(func() {
				<-startLine
				if err := s.Release(ctx, key, tok); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("release %s: %w", key, err))
					mu.Unlock()
				}
			})
			for range renewers {
				wg.Go(func() {
					<-startLine
					for range 3 {
						err := s.Renew(ctx, key, tok, time.Hour)
						mu.Lock()
						switch {
						case err == nil:
							ok++
						case errors.Is(err, store.ErrLeaseLost):
							lost++
						default:
							failures = append(failures, fmt.Errorf("renew %s: %w", key, err))
						}
						mu.Unlock()
					}
				})
			}
		}
		close(startLine)
		wg.Wait()
		require.Empty(t, failures)
		assert.Positive(t, lost, "no renewal came after a release")
		t.Logf("%d renewals before the release, %d refused after it", ok, lost)
		// Renewals after the race: all refused.
		for i := range keys {
			assert.ErrorIs(t, s.Renew(ctx, "k"+strconv.Itoa(i), toks[i], time.Hour), store.ErrLeaseLost)
		}
		var rows int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.Table()).Scan(&rows))
		assert.Zero(t, rows, "a renewal brought a released key back")
		for i := range keys {
			key := "k" + strconv.Itoa(i)
			_, err := s.Get(ctx, key)
			assert.ErrorIs(t, err, store.ErrNotFound)
			r := claimed(t, s, key, store.NewToken(), time.Minute)
			assert.EqualValues(t, 1, r.Attempt, "key %s after its release", key)
		}
	})
}

// TestReleaseLeavesLapsedLease: Release by the holder of a lapsed lease
// leaves the record, so the claim that takes it over counts attempt 2.
func TestReleaseLeavesLapsedLease(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	tok := store.NewToken()
	first := claimed(t, s, "k", tok, shortLease)
	lapse()
	require.NoError(t, s.Release(ctx, "k", tok))
	e := lookup(t, s, "k")
	assert.Equal(t, store.StateLapsed, e.State)
	r := claimed(t, s, "k", store.NewToken(), time.Minute)
	assert.EqualValues(t, 2, r.Attempt)
	assert.Greater(t, r.Fence, first.Fence)
}

// age moves key's deadline back by d, as if its lease or retention had
// ended d earlier.
func age(t *testing.T, s *Store, key string, d time.Duration) {
	t.Helper()
	res, err := s.DB().ExecContext(t.Context(), "UPDATE "+s.Table()+
		" SET expires_at = DATE_SUB(expires_at, INTERVAL ? MICROSECOND) WHERE `key` = ?", micros(d), key)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "age %q", key)
}

// TestPurgeKeepsLapsed: Purge deletes expired completed records at once,
// but keeps a lapsed lease until it is store.LapsedKept old, and a claim
// of it in that time counts the attempt.
func TestPurgeKeepsLapsed(t *testing.T) {
	s := newTestStore(t, testDB(t))
	ctx := t.Context()
	for _, k := range []string{"lapsed", "lapsed-old", "lapsed-almost", "taken"} {
		claimed(t, s, k, store.NewToken(), shortLease)
	}
	done := store.NewToken()
	claimed(t, s, "expired", done, time.Minute)
	require.NoError(t, s.Complete(ctx, "expired", done, []byte("r"), time.Millisecond))
	claimed(t, s, "live", store.NewToken(), time.Minute)
	lapse()
	age(t, s, "lapsed-old", store.LapsedKept)
	age(t, s, "lapsed-almost", store.LapsedKept-time.Minute)
	age(t, s, "taken", store.LapsedKept-time.Minute)

	n, err := s.Purge(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "Purge should delete the expired record and the lapsed lease LapsedKept old")
	for _, k := range []string{"expired", "lapsed-old"} {
		_, err := s.Lookup(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s not purged", k)
	}
	for _, k := range []string{"lapsed", "lapsed-almost", "taken"} {
		e := lookup(t, s, k)
		assert.Equal(t, store.StateLapsed, e.State, k)
		_, err := s.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, "a kept lapsed lease is absent to Get")
	}
	c, err := s.Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, c.Lapsed)
	assert.EqualValues(t, 1, c.InProgress)
	// A kept lapsed lease is still taken over as absent, one attempt on.
	r := claimed(t, s, "taken", store.NewToken(), time.Minute)
	assert.EqualValues(t, 2, r.Attempt)
	// A purged one starts again at 1.
	r = claimed(t, s, "lapsed-old", store.NewToken(), time.Minute)
	assert.EqualValues(t, 1, r.Attempt)
	n, err = s.Purge(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// oldDDL is the table as Migrate created it before the attempt and fence
// columns (idemkit before issue 25), for table %s.
const oldDDL = "CREATE TABLE %s (\n" +
	"	`key`       VARBINARY(1024) NOT NULL,\n" +
	"	fingerprint VARBINARY(1024) NOT NULL,\n" +
	"	token       VARBINARY(128) NOT NULL,\n" +
	"	status      TINYINT NOT NULL CHECK (status IN (1, 2)),\n" +
	"	response    LONGBLOB NULL,\n" +
	"	expires_at  DATETIME(6) NOT NULL,\n" +
	"	PRIMARY KEY (`key`),\n" +
	"	KEY %s (expires_at)\n" +
	") ENGINE=InnoDB ROW_FORMAT=DYNAMIC"

// TestMigrateOldTable: Migrate adds the attempt and fence columns to a
// table of the old schema in place, from several processes at once,
// keeping its rows, which then read Attempt 0 and Fence 0 and are taken
// over as any other.
func TestMigrateOldTable(t *testing.T) {
	db := openDB(t, 8, nil)
	name := uniqueName("idemkit_my_old_")
	ctx := t.Context()
	_, err := db.ExecContext(ctx, fmt.Sprintf(oldDDL, quoteIdent(name), quoteIdent(name+indexSuffix)))
	require.NoError(t, err)
	s, err := New(db, WithTable(name))
	require.NoError(t, err)
	dropOnCleanup(t, s)
	// Rows the old code wrote: a live lease, a completed record, a lapsed
	// lease.
	_, err = db.ExecContext(ctx, "INSERT INTO "+s.Table()+" (`key`, fingerprint, token, status, response, expires_at) VALUES "+
		"('live', 'fp', 'tok-live', 1, NULL, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR),"+
		"('done', 'fp', 'tok-done', 2, 'resp', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR),"+
		"('lapsed', 'fp', 'tok-lapsed', 1, NULL, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND)")
	require.NoError(t, err)
	// The old table fails the new code's statements until migrated.
	_, err = s.Get(ctx, "live")
	require.Error(t, err)

	// Several processes (Stores of their own) migrate at once.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			other, err := New(db, WithTable(name))
			if err != nil {
				errs[i] = err
				return
			}
			defer other.Close()
			<-start
			errs[i] = other.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(ctx), "Migrate again on the upgraded table")

	var cols int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME IN ('attempt', 'fence')`, name).Scan(&cols))
	assert.Equal(t, 2, cols)

	// The old rows read attempt 0 and fence 0.
	live, err := s.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, store.Token("tok-live"), live.Token)
	assert.Zero(t, live.Attempt)
	assert.Zero(t, live.Fence)
	done, err := s.Get(ctx, "done")
	require.NoError(t, err)
	assert.Equal(t, []byte("resp"), done.Response)
	assert.Zero(t, done.Attempt)
	e := lookup(t, s, "lapsed")
	assert.Equal(t, store.StateLapsed, e.State)
	assert.Zero(t, e.Attempt)

	// They work as before: the holder renews and completes its old lease,
	// a replay still replays.
	require.NoError(t, s.Renew(ctx, "live", "tok-live", time.Minute))
	again := claimed(t, s, "live", "tok-live", time.Minute)
	assert.Zero(t, again.Attempt, "a re-entrant claim keeps the old row's attempt")
	require.NoError(t, s.Complete(ctx, "live", "tok-live", []byte("ok"), time.Hour))
	c, err := s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Completed, c.Outcome)
	// Taking over the old lapsed lease counts it as the first attempt.
	before := time.Now()
	r := claimed(t, s, "lapsed", store.NewToken(), time.Minute)
	assert.EqualValues(t, 2, r.Attempt)
	assert.InDelta(t, float64(before.UnixMicro()), float64(r.Fence), float64(5*time.Second/time.Microsecond))
	sameAsStored(t, s, r)
	// New keys as on a new table.
	r = claimed(t, s, "new", store.NewToken(), time.Minute)
	assert.EqualValues(t, 1, r.Attempt)
	assert.NotZero(t, r.Fence)
}

// TestMigrateHalfUpgraded: a table that has one of the new columns (added
// by hand, say) gets the other.
func TestMigrateHalfUpgraded(t *testing.T) {
	db := testDB(t)
	name := uniqueName("idemkit_my_old_")
	ctx := t.Context()
	_, err := db.ExecContext(ctx, fmt.Sprintf(oldDDL, quoteIdent(name), quoteIdent(name+indexSuffix)))
	require.NoError(t, err)
	s, err := New(db, WithTable(name))
	require.NoError(t, err)
	dropOnCleanup(t, s)
	_, err = db.ExecContext(ctx, "ALTER TABLE "+s.Table()+" ADD COLUMN fence BIGINT UNSIGNED NOT NULL DEFAULT 0")
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	r := claimed(t, s, "k", store.NewToken(), time.Minute)
	assert.EqualValues(t, 1, r.Attempt)
	sameAsStored(t, s, r)
}

// TestRenewSameMicrosecond: a renewal that sets the very expiry the lease
// already has changes no row, which MySQL reports as 0 affected rows
// without clientFoundRows; Renew still succeeds. The session's timestamp
// is pinned (SET timestamp), so the server's UTC_TIMESTAMP(6) reads the
// same instant in every statement.
func TestRenewSameMicrosecond(t *testing.T) {
	for _, found := range []bool{false, true} {
		t.Run(map[bool]string{false: "changed", true: "clientFoundRows"}[found], func(t *testing.T) {
			pinned := time.Now().Truncate(time.Second).Add(123456 * time.Microsecond)
			db := openDB(t, 1, func(c *dsnConfig) {
				c.ClientFoundRows = found
				c.Params["timestamp"] = strconv.FormatInt(pinned.Unix(), 10) + ".123456"
			})
			s := newTestStore(t, db)
			ctx := t.Context()
			tok := store.NewToken()
			r := claimed(t, s, "k", tok, time.Minute)
			require.True(t, r.LockedUntil.Equal(pinned.Add(time.Minute)), "the session's clock is not pinned: lease ends %v", r.LockedUntil)
			require.NoError(t, s.Renew(ctx, "k", tok, time.Minute), "a renewal to the expiry the lease has")
			require.NoError(t, s.Renew(ctx, "k", tok, time.Minute), "the same renewal again")
			again := claimed(t, s, "k", tok, time.Minute) // a re-entrant claim to the same expiry
			assert.True(t, again.LockedUntil.Equal(r.LockedUntil))
			assert.Equal(t, r.Fence, again.Fence)
			assert.ErrorIs(t, s.Renew(ctx, "k", store.NewToken(), time.Minute), store.ErrLeaseLost)
			require.NoError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Hour))
			assert.ErrorIs(t, s.Renew(ctx, "k", tok, time.Minute), store.ErrLeaseLost)
		})
	}
}
