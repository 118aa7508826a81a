package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// moveExpiry sets key's expires_at to the server's clock plus by (negative:
// in the past), as if its lease or retention had been granted for that long.
func moveExpiry(t *testing.T, s *Store, key string, by time.Duration) {
	t.Helper()
	tag, err := s.db.Exec(context.Background(), `UPDATE `+s.Table()+` SET expires_at = clock_timestamp() + $2::interval WHERE key = $1`, key, interval(by))
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "no row for %q", key)
}

// rawRow is a row as stored, whatever its state.
type rawRow struct {
	token     string
	status    int16
	expiresAt time.Time
	attempt   int32
	fence     int64
}

// readRow returns key's row and whether there is one.
func readRow(t *testing.T, s *Store, key string) (rawRow, bool) {
	t.Helper()
	var r rawRow
	err := s.db.QueryRow(context.Background(), `SELECT token, status, expires_at, attempt, fence FROM `+s.Table()+` WHERE key = $1`, key).
		Scan(&r.token, &r.status, &r.expiresAt, &r.attempt, &r.fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

// serverMicros returns the server's clock in µs since the Unix epoch.
func serverMicros(t *testing.T, s *Store) uint64 {
	t.Helper()
	var us int64
	require.NoError(t, s.db.QueryRow(context.Background(), `SELECT `+micros("clock_timestamp()")).Scan(&us))
	return uint64(us)
}

// TestRenewCases runs Renew against each state of its key: only a live
// lease of the token is extended (keeping attempt and fence); every other
// case is ErrLeaseLost and leaves the row exactly as it was, or absent.
func TestRenewCases(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	tok, other := store.NewToken(), store.NewToken()
	claim := func(key string, tk store.Token) store.Claim {
		t.Helper()
		c, err := s.Claim(ctx, key, "fp", tk, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome, key)
		return c
	}

	t.Run("live own lease", func(t *testing.T) {
		c := claim("live", tok)
		require.NoError(t, s.Renew(ctx, "live", tok, time.Hour))
		r, err := s.Get(ctx, "live")
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Hour), r.LockedUntil, 10*time.Second)
		require.True(t, r.LockedUntil.After(c.Record.LockedUntil))
		require.Equal(t, r.LockedUntil, r.ExpiresAt)
		require.Equal(t, c.Record.Attempt, r.Attempt)
		require.Equal(t, c.Record.Fence, r.Fence)
		require.Equal(t, store.StatusInProgress, r.Status)
		require.Equal(t, tok, r.Token)
		// A shorter lease shortens it: the lease is from now, not added.
		require.NoError(t, s.Renew(ctx, "live", tok, time.Second))
		r, err = s.Get(ctx, "live")
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Second), r.LockedUntil, 5*time.Second)
	})

	lost := func(t *testing.T, key string, tk store.Token) {
		t.Helper()
		before, had := readRow(t, s, key)
		err := s.Renew(ctx, key, tk, time.Hour)
		require.ErrorIs(t, err, store.ErrLeaseLost)
		require.NotErrorIs(t, err, store.ErrInvalid)
		after, has := readRow(t, s, key)
		require.Equal(t, had, has, "Renew created or deleted the row")
		require.Equal(t, before, after, "Renew changed the row")
	}
	t.Run("absent", func(t *testing.T) { lost(t, "never", tok) })
	t.Run("released", func(t *testing.T) {
		claim("released", tok)
		require.NoError(t, s.Release(ctx, "released", tok))
		lost(t, "released", tok)
		c := claim("released", other)
		require.EqualValues(t, 1, c.Record.Attempt, "a release counts from 1 again")
	})
	t.Run("lapsed own lease", func(t *testing.T) {
		claim("lapsed", tok)
		moveExpiry(t, s, "lapsed", -time.Second)
		lost(t, "lapsed", tok)
		_, err := s.Get(ctx, "lapsed")
		require.ErrorIs(t, err, store.ErrNotFound, "Renew revived a lapsed lease")
	})
	t.Run("completed by the token", func(t *testing.T) {
		claim("done", tok)
		require.NoError(t, s.Complete(ctx, "done", tok, []byte("r"), time.Hour))
		lost(t, "done", tok)
		r, err := s.Get(ctx, "done")
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, r.Status)
		require.Equal(t, []byte("r"), r.Response)
	})
	t.Run("expired completed", func(t *testing.T) {
		claim("expired", tok)
		require.NoError(t, s.Complete(ctx, "expired", tok, []byte("r"), time.Hour))
		moveExpiry(t, s, "expired", -time.Second)
		lost(t, "expired", tok)
	})
	t.Run("another token's lease", func(t *testing.T) {
		claim("theirs", other)
		lost(t, "theirs", tok)
		r, err := s.Get(ctx, "theirs")
		require.NoError(t, err)
		require.Equal(t, other, r.Token)
	})
	t.Run("invalid arguments", func(t *testing.T) {
		claim("valid", tok)
		for name, call := range map[string]func() error{
			"empty key":      func() error { return s.Renew(ctx, "", tok, time.Minute) },
			"empty token":    func() error { return s.Renew(ctx, "valid", "", time.Minute) },
			"zero lease":     func() error { return s.Renew(ctx, "valid", tok, 0) },
			"negative lease": func() error { return s.Renew(ctx, "valid", tok, -time.Second) },
			"NUL in key":     func() error { return s.Renew(ctx, "a\x00b", tok, time.Minute) },
		} {
			before, _ := readRow(t, s, "valid")
			err := call()
			require.ErrorIs(t, err, store.ErrInvalid, name)
			require.NotErrorIs(t, err, store.ErrLeaseLost, name)
			after, _ := readRow(t, s, "valid")
			require.Equal(t, before, after, name)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		claim("cancel", tok)
		before, _ := readRow(t, s, "cancel")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.Renew(cctx, "cancel", tok, time.Hour), context.Canceled)
		after, _ := readRow(t, s, "cancel")
		require.Equal(t, before, after)
	})
}

// TestRenewInTx: the Store InTx passes renews within the transaction, so
// the renewal commits or rolls back with it, and a lease claimed in the
// transaction can be renewed before it commits.
func TestRenewInTx(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	tok := store.NewToken()
	var until time.Time
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		c, err := tx.Claim(ctx, "k", "fp", tok, time.Second)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		require.NoError(t, tx.Renew(ctx, "k", tok, time.Hour))
		require.ErrorIs(t, tx.Renew(ctx, "absent", tok, time.Hour), store.ErrLeaseLost)
		r, err := tx.Get(ctx, "k")
		require.NoError(t, err)
		until = r.LockedUntil
		return nil
	}))
	r, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, until, r.LockedUntil)
	require.WithinDuration(t, time.Now().Add(time.Hour), r.LockedUntil, 10*time.Second)

	// Rolled back: the renewal is undone with the transaction.
	boom := errors.New("boom")
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		require.NoError(t, tx.Renew(ctx, "k", tok, 48*time.Hour))
		return boom
	})
	require.ErrorIs(t, err, boom)
	r, err = s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, until, r.LockedUntil)
}

// TestAttemptsAndFences follows one key through every kind of claim that
// acquires it, with Claim pinned to each of its first statements and with
// coalescing: the attempt and fence each sets, as store.Successor says, as
// Claim, Get and Lookup report them.
func TestAttemptsAndFences(t *testing.T) {
	pool := testPool(t)
	for _, c := range []struct {
		name string
		opts []Option
		pin  int8
	}{
		{"InsertFirst", nil, 1}, {"ReadFirst", nil, 2}, {"Coalescing", []Option{WithCoalescing(true)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestStore(t, pool, c.opts...)
			s.stats.pin = c.pin
			ctx := context.Background()
			acquire := func(key string, tok store.Token) store.Record {
				t.Helper()
				cl, err := s.Claim(ctx, key, "fp", tok, time.Minute)
				require.NoError(t, err)
				require.Equal(t, store.Acquired, cl.Outcome, key)
				require.Equal(t, tok, cl.Record.Token)
				got, err := s.Get(ctx, key)
				require.NoError(t, err)
				require.Equal(t, cl.Record.Attempt, got.Attempt, "Get's attempt")
				require.Equal(t, cl.Record.Fence, got.Fence, "Get's fence")
				e, err := s.Lookup(ctx, key)
				require.NoError(t, err)
				require.Equal(t, cl.Record.Attempt, e.Attempt, "Lookup's attempt")
				require.Equal(t, cl.Record.Fence, e.Fence, "Lookup's fence")
				return cl.Record
			}

			// A fresh key: attempt 1, the fence the server's clock in µs.
			lo := serverMicros(t, s)
			a := store.NewToken()
			first := acquire("k", a)
			hi := serverMicros(t, s)
			require.EqualValues(t, 1, first.Attempt)
			require.GreaterOrEqual(t, first.Fence, lo)
			require.LessOrEqual(t, first.Fence, hi)
			require.False(t, store.Claim{Outcome: store.Acquired, Record: first}.Takeover())

			// Re-entrant: both unchanged.
			again := acquire("k", a)
			require.Equal(t, first.Attempt, again.Attempt)
			require.Equal(t, first.Fence, again.Fence)
			require.NoError(t, s.Renew(ctx, "k", a, time.Minute))
			r, err := s.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, first.Fence, r.Fence, "Renew keeps the fence")

			// The lease lapses and another token takes over: attempt 2,
			// a larger fence; the first holder is fenced out.
			moveExpiry(t, s, "k", -time.Second)
			b := store.NewToken()
			second := acquire("k", b)
			require.EqualValues(t, 2, second.Attempt)
			require.Greater(t, second.Fence, first.Fence)
			require.True(t, store.Claim{Outcome: store.Acquired, Record: second}.Takeover())
			require.ErrorIs(t, s.Complete(ctx, "k", a, []byte("late"), time.Hour), store.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, "k", a, time.Hour), store.ErrLeaseLost)
			require.NoError(t, s.Release(ctx, "k", a), "the old holder's release changes nothing")
			r, err = s.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, b, r.Token)
			require.Equal(t, second.Fence, r.Fence)

			// Its own lapsed lease taken over by the same token counts too.
			moveExpiry(t, s, "k", -time.Second)
			third := acquire("k", b)
			require.EqualValues(t, 3, third.Attempt)
			require.Greater(t, third.Fence, second.Fence)

			// Completed: the record keeps them; a replay reports them.
			require.NoError(t, s.Complete(ctx, "k", b, []byte("r"), time.Hour))
			cl, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
			require.NoError(t, err)
			require.Equal(t, store.Completed, cl.Outcome)
			require.EqualValues(t, 3, cl.Record.Attempt)
			require.Equal(t, third.Fence, cl.Record.Fence)

			// Retention over: counts from 1, the fence still grows.
			moveExpiry(t, s, "k", -time.Second)
			fourth := acquire("k", store.NewToken())
			require.EqualValues(t, 1, fourth.Attempt)
			require.Greater(t, fourth.Fence, third.Fence)

			// A fence ahead of the clock (a clock that stepped back):
			// a takeover still goes past it by one.
			const ahead = 1 << 62
			_, err = s.db.Exec(ctx, `UPDATE `+s.Table()+` SET fence = $2, expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`, "k", int64(ahead))
			require.NoError(t, err)
			fifth := acquire("k", store.NewToken())
			require.EqualValues(t, 2, fifth.Attempt)
			require.EqualValues(t, uint64(ahead)+1, fifth.Fence)

			// Released: the next claim counts from 1, a fresh row.
			tok := store.NewToken()
			acquire("k2", tok)
			require.NoError(t, s.Release(ctx, "k2", tok))
			require.EqualValues(t, 1, acquire("k2", store.NewToken()).Attempt)

			// The Inspector lists a lapsed lease with its attempt and fence.
			moveExpiry(t, s, "k", -time.Second)
			e, err := s.Lookup(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, store.StateLapsed, e.State)
			require.EqualValues(t, 2, e.Attempt)
			require.EqualValues(t, uint64(ahead)+1, e.Fence)
			page, err := s.List(ctx, store.ListOptions{State: store.StateLapsed})
			require.NoError(t, err)
			require.Len(t, page.Entries, 1)
			require.EqualValues(t, 2, page.Entries[0].Attempt)
		})
	}
}

// TestFreshFencesInBatch: claims of new keys coalesced into one INSERT each
// get attempt 1 and a fence of the server's clock.
func TestFreshFencesInBatch(t *testing.T) {
	s := newTestStore(t, testPool(t), WithCoalescing(true))
	ctx := context.Background()
	batched := false
	for try := 0; try < 20 && !batched; try++ {
		p := "b" + strconv.Itoa(try) + "-"
		bl := newBlocker(p + "blocker")
		gateClaims(s, bl)
		const n = 8
		got := make([]store.Claim, n)
		errs := make([]error, n)
		lo := serverMicros(t, s)
		batched = inOneBatch(t, s.batch.claims, bl, n, func(i int) {
			if i < 0 {
				_, err := s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
				assert.NoError(t, err)
				return
			}
			got[i], errs[i] = s.Claim(ctx, p+strconv.Itoa(i), "fp", store.NewToken(), time.Minute)
		})
		hi := serverMicros(t, s)
		for i := range n {
			require.NoError(t, errs[i])
			require.Equal(t, store.Acquired, got[i].Outcome)
			require.EqualValues(t, 1, got[i].Record.Attempt)
			require.GreaterOrEqual(t, got[i].Record.Fence, lo)
			require.LessOrEqual(t, got[i].Record.Fence, hi)
			r, err := s.Get(ctx, p+strconv.Itoa(i))
			require.NoError(t, err)
			require.Equal(t, got[i].Record.Fence, r.Fence)
		}
	}
	require.True(t, batched, "the claims never ran as one batch")
}

// TestTakeoverRaceAttempts races goroutines to take over one lapsed lease
// many times over: each round exactly one acquires, with the attempt one
// more than the round before and a larger fence.
func TestTakeoverRaceAttempts(t *testing.T) {
	const goroutines, rounds = 8, 6
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	prev := c.Record
	for round := range rounds {
		moveExpiry(t, s, "k", -time.Millisecond)
		start := make(chan struct{})
		var mu sync.Mutex
		var wins []store.Record
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				if c.Outcome == store.Acquired {
					mu.Lock()
					wins = append(wins, c.Record)
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Len(t, wins, 1, "round %d", round)
		require.Equal(t, prev.Attempt+1, wins[0].Attempt, "round %d", round)
		require.Greater(t, wins[0].Fence, prev.Fence, "round %d", round)
		prev = wins[0]
	}
}

// TestRenewAfterRelease races, on many keys at once, each holder's Release
// against a late Renew of the same lease (a heartbeat still in flight):
// whichever reaches the server first, the key ends up free, the renewal
// never brings it back, and the next claim acquires it with attempt 1.
func TestRenewAfterRelease(t *testing.T) {
	pool := testPool(t)
	for _, c := range []struct {
		name string
		opts []Option
	}{{"Plain", nil}, {"Coalescing", []Option{WithCoalescing(true)}}} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestStore(t, pool, c.opts...)
			ctx := context.Background()
			const keys = 100
			toks := make([]store.Token, keys)
			var wg sync.WaitGroup
			for i := range keys {
				toks[i] = store.NewToken()
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := s.Claim(ctx, "k"+strconv.Itoa(i), "fp", toks[i], time.Minute)
					assert.NoError(t, err)
					assert.Equal(t, store.Acquired, c.Outcome)
				}()
			}
			wg.Wait()
			start := make(chan struct{})
			renewed := make([]error, keys)
			for i := range keys {
				key := "k" + strconv.Itoa(i)
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					assert.NoError(t, s.Release(ctx, key, toks[i]))
				}()
				go func() {
					defer wg.Done()
					<-start
					renewed[i] = s.Renew(ctx, key, toks[i], time.Hour)
				}()
			}
			close(start)
			wg.Wait()
			var won, lost int
			for i := range keys {
				key := "k" + strconv.Itoa(i)
				switch err := renewed[i]; {
				case err == nil:
					won++ // renewed before the release
				case errors.Is(err, store.ErrLeaseLost):
					lost++
				default:
					t.Fatalf("%s: Renew: %v", key, err)
				}
				_, has := readRow(t, s, key)
				require.False(t, has, "%s: a row is left after the release (renew err %v)", key, renewed[i])
			}
			t.Logf("%d renewals before the release, %d after", won, lost)
			// The keys are free: new claims, concurrent (so batched with
			// coalescing), acquire each with attempt 1.
			got := make([]store.Claim, keys)
			for i := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					got[i], err = s.Claim(ctx, "k"+strconv.Itoa(i), "fp", store.NewToken(), time.Minute)
					assert.NoError(t, err)
				}()
			}
			wg.Wait()
			for i := range keys {
				require.Equal(t, store.Acquired, got[i].Outcome, "k%d", i)
				require.EqualValues(t, 1, got[i].Record.Attempt, "k%d", i)
				require.ErrorIs(t, s.Renew(ctx, "k"+strconv.Itoa(i), toks[i], time.Hour), store.ErrLeaseLost, "the released token renews the new lease")
			}
		})
	}
}

// TestReleaseLeavesLapsedLease: a Release after the lease lapsed deletes
// nothing, so the claim that takes the key over counts the attempt.
func TestReleaseLeavesLapsedLease(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	tok := store.NewToken()
	c, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	require.NoError(t, err)
	moveExpiry(t, s, "k", -time.Second)
	require.NoError(t, s.Release(ctx, "k", tok))
	row, has := readRow(t, s, "k")
	require.True(t, has, "Release deleted a lapsed lease")
	require.Equal(t, string(tok), row.token)
	_, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "a lapsed lease is absent to Get")
	next, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, next.Outcome)
	require.EqualValues(t, 2, next.Record.Attempt)
	require.Greater(t, next.Record.Fence, c.Record.Fence)
}

// TestPurgeKeepsLapsedForTakeover: a lease lapsed less than
// store.LapsedKept ago survives Purge, absent to Get, listed as lapsed, and
// the claim that takes it over counts attempt 2; one lapsed longer ago is
// purged, and the key counts from 1 again.
func TestPurgeKeepsLapsedForTakeover(t *testing.T) {
	s := newTestStore(t, testPool(t))
	ctx := context.Background()
	for _, k := range []string{"recent", "old", "done"} {
		tok := store.NewToken()
		c, err := s.Claim(ctx, k, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		if k == "done" {
			require.NoError(t, s.Complete(ctx, k, tok, []byte("r"), time.Hour))
		}
	}
	moveExpiry(t, s, "recent", -(store.LapsedKept - time.Minute))
	moveExpiry(t, s, "old", -(store.LapsedKept + time.Second))
	moveExpiry(t, s, "done", -time.Second)
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the old lapsed lease and the expired completion")
	_, err = s.Get(ctx, "recent")
	require.ErrorIs(t, err, store.ErrNotFound)
	e, err := s.Lookup(ctx, "recent")
	require.NoError(t, err)
	require.Equal(t, store.StateLapsed, e.State)
	counts, err := s.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts.Lapsed)
	for key, want := range map[string]uint32{"recent": 2, "old": 1, "done": 1} {
		c, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome, key)
		require.Equal(t, want, c.Record.Attempt, key)
	}
}

// oldTableSQL is the table as idemkit created it before the attempt and
// fence columns.
func oldTableSQL(table string) string {
	return `CREATE TABLE ` + table + ` (
	key         text COLLATE "C" PRIMARY KEY,
	fingerprint text NOT NULL,
	token       text NOT NULL,
	status      smallint NOT NULL CHECK (status IN (1, 2)),
	response    bytea,
	expires_at  timestamptz NOT NULL
);
CREATE INDEX ` + table[:len(table)-1] + indexSuffix + `" ON ` + table + ` (expires_at)`
}

// TestMigrateOldTable: Migrate adds the attempt and fence columns to a
// table made before them, in place, from several processes at once; its
// rows read as attempt 0 and fence 0 and go on working (a replay, a live
// lease completed, a lapsed lease taken over as attempt 2), and a second
// Migrate changes nothing.
func TestMigrateOldTable(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	table := uniqueName("idemkit_pg_old_")
	dropOnCleanup(t, "TABLE", quote(table))
	_, err := pool.Exec(ctx, oldTableSQL(quote(table)))
	require.NoError(t, err)
	holder := store.NewToken()
	_, err = pool.Exec(ctx, `INSERT INTO `+quote(table)+` (key, fingerprint, token, status, response, expires_at) VALUES
	('done', 'fp', 't', 2, '\x7b7d', clock_timestamp() + interval '1 hour'),
	('live', 'fp', $1, 1, NULL, clock_timestamp() + interval '1 hour'),
	('lapsed', 'fp', 't', 1, NULL, clock_timestamp() - interval '1 second')`, string(holder))
	require.NoError(t, err)

	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := New(pool, WithTable(table))
			if err == nil {
				<-start
				err = s.Migrate(ctx)
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "migration %d", i)
	}
	s, err := New(pool, WithTable(table))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx), "a second Migrate")
	var cols []string
	rows, err := pool.Query(ctx, `SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
FROM information_schema.columns WHERE table_name = $1 AND column_name IN ('attempt', 'fence') ORDER BY column_name`, table)
	require.NoError(t, err)
	cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"attempt integer NO 0", "fence bigint NO 0"}, cols)

	r, err := s.Get(ctx, "done")
	require.NoError(t, err)
	require.EqualValues(t, 0, r.Attempt, "an old row reads as attempt 0")
	require.EqualValues(t, 0, r.Fence, "an old row reads as fence 0")
	c, err := s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	require.Equal(t, []byte("{}"), c.Record.Response)
	require.NoError(t, s.Renew(ctx, "live", holder, time.Minute))
	require.NoError(t, s.Complete(ctx, "live", holder, []byte("ok"), time.Hour))
	c, err = s.Claim(ctx, "lapsed", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.EqualValues(t, 2, c.Record.Attempt)
	require.Positive(t, c.Record.Fence)
	e, err := s.Lookup(ctx, "done")
	require.NoError(t, err)
	require.EqualValues(t, 0, e.Attempt)
}

// TestSchemaUpgradesOldTable: the exported Schema, run on a table made
// before the attempt and fence columns (as a migration tool would), adds
// them too.
func TestSchemaUpgradesOldTable(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	table := uniqueName("idemkit_pg_old_")
	dropOnCleanup(t, "TABLE", quote(table))
	_, err := pool.Exec(ctx, oldTableSQL(quote(table)))
	require.NoError(t, err)
	s, err := New(pool, WithTable(table))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, s.Schema())
	require.NoError(t, err)
	_, err = pool.Exec(ctx, s.Schema())
	require.NoError(t, err, "the DDL is idempotent")
	c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Record.Attempt)
}

// TestMigrateCurrentTableTakesNoTableLock: on a table that has every
// column, Migrate does not run the ALTER TABLE, whose exclusive lock would
// wait behind every transaction that so much as read the table (a long
// List, say), and hold up all traffic queued behind it: with a transaction
// that read the table still open, it returns at once.
func TestMigrateCurrentTableTakesNoTableLock(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM `+s.Table()).Scan(&n))
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, s.Migrate(mctx))

	// The control: the ALTER itself does wait for that transaction.
	actx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = pool.Exec(actx, addColumnsSQL(s.opts))
	require.Error(t, err, "ALTER TABLE did not wait for the open transaction: the test shows nothing")
}

// TestFenceSQLMatchesGo: the server's µs of an instant are what
// store.Successor reads from the same instant in Go.
func TestFenceSQLMatchesGo(t *testing.T) {
	s := newTestStore(t, testPool(t))
	for _, at := range []time.Time{
		time.Unix(0, 0), time.Unix(1, 999999000), time.Date(2026, 12, 2, 13, 54, 50, 123456000, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 1000, time.UTC),
	} {
		var us int64
		require.NoError(t, s.db.QueryRow(context.Background(), `SELECT `+micros("$1::timestamptz"), at).Scan(&us))
		require.Equal(t, at.UnixMicro(), us, fmt.Sprint(at))
	}
}
