package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// fixture is a Store on a file with a manual clock, and the ways to look
// at its table directly.
type fixture struct {
	t     *testing.T
	s     *Store
	clock *storetest.ManualClock
	// order, when not zero, is the claim order forced before every claim:
	// above zero writes first, below zero reads first.
	order int32
}

func newFixture(t *testing.T, order int32) *fixture {
	t.Helper()
	clock := storetest.NewManualClock(time.Now().Truncate(time.Second))
	return &fixture{t: t, s: newTestStore(t, WithClock(clock.Now)), clock: clock, order: order}
}

// orders runs fn with the claim order forced each way: both paths of
// runner.claim must compute the same Attempt and Fence.
func orders(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, o := range []struct {
		name  string
		order int32
	}{{"WriteFirst", claimHintMax}, {"ReadFirst", -claimHintMax}} {
		t.Run(o.name, func(t *testing.T) { fn(t, newFixture(t, o.order)) })
	}
}

func (f *fixture) claim(key string, tok store.Token, lease time.Duration) store.Claim {
	f.t.Helper()
	if f.order != 0 {
		f.s.claimHint.Store(f.order)
	}
	c, err := f.s.Claim(f.t.Context(), key, "fp", tok, lease)
	require.NoError(f.t, err)
	return c
}

func (f *fixture) acquire(key string, tok store.Token, lease time.Duration) store.Claim {
	f.t.Helper()
	c := f.claim(key, tok, lease)
	require.Equal(f.t, store.Acquired, c.Outcome, "claim %s", key)
	return c
}

// row is a record as the table holds it, live or not.
type row struct {
	found                           bool
	token                           string
	status, until, expires, attempt int64
	fence                           int64
	response                        []byte
}

func (f *fixture) row(key string) row {
	f.t.Helper()
	var r row
	err := f.s.DB().QueryRow(`SELECT token, status, locked_until, expires_at, attempt, fence, response FROM idempotency_keys WHERE key = ?1`, key).
		Scan(&r.token, &r.status, &r.until, &r.expires, &r.attempt, &r.fence, &r.response)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}
	}
	require.NoError(f.t, err)
	r.found = true
	return r
}

// prev is the record Successor is given for the row under key.
func (f *fixture) prev(key string) (store.Record, bool) {
	r := f.row(key)
	if !r.found {
		return store.Record{}, false
	}
	st := store.StatusInProgress
	if r.status == statusCompleted {
		st = store.StatusCompleted
	}
	return store.Record{Status: st, Token: store.Token(r.token), ExpiresAt: fromMicros(r.expires),
		Attempt: uint32(r.attempt), Fence: uint64(r.fence)}, true
}

// acquireAsSuccessor claims key, which must acquire, and checks that its
// Attempt and Fence are what store.Successor says for the row it replaced,
// in the Claim's record, in Get and in Lookup.
func (f *fixture) acquireAsSuccessor(key string, tok store.Token, lease time.Duration) store.Claim {
	f.t.Helper()
	prev, found := f.prev(key)
	attempt, fence := store.Successor(prev, found, tok, f.clock.Now())
	c := f.acquire(key, tok, lease)
	assert.Equal(f.t, attempt, c.Record.Attempt, "%s: Claim's Attempt (prev %+v, found %v)", key, prev, found)
	assert.Equal(f.t, fence, c.Record.Fence, "%s: Claim's Fence (prev %+v, found %v)", key, prev, found)
	got, err := f.s.Get(f.t.Context(), key)
	require.NoError(f.t, err)
	assert.Equal(f.t, attempt, got.Attempt, "%s: Get's Attempt", key)
	assert.Equal(f.t, fence, got.Fence, "%s: Get's Fence", key)
	e, err := f.s.Lookup(f.t.Context(), key)
	require.NoError(f.t, err)
	assert.Equal(f.t, attempt, e.Attempt, "%s: Lookup's Attempt", key)
	assert.Equal(f.t, fence, e.Fence, "%s: Lookup's Fence", key)
	return c
}

func TestAttemptAndFence(t *testing.T) {
	orders(t, func(t *testing.T, f *fixture) {
		ctx := t.Context()
		first, second, third := store.NewToken(), store.NewToken(), store.NewToken()

		// A fresh key: attempt 1, the fence is the clock in µs.
		c := f.acquireAsSuccessor("k", first, time.Second)
		assert.Equal(t, uint32(1), c.Record.Attempt)
		assert.Equal(t, uint64(f.clock.Now().UnixMicro()), c.Record.Fence)
		assert.False(t, c.Takeover())
		fence1 := c.Record.Fence

		// A re-entrant claim keeps both, also after the clock moved.
		f.clock.Advance(500 * time.Millisecond)
		c = f.acquireAsSuccessor("k", first, time.Second)
		assert.Equal(t, uint32(1), c.Record.Attempt)
		assert.Equal(t, fence1, c.Record.Fence)
		// A renewal too.
		require.NoError(t, f.s.Renew(ctx, "k", first, time.Second))
		assert.Equal(t, int64(1), f.row("k").attempt)
		assert.Equal(t, int64(fence1), f.row("k").fence)

		// The lease lapses: a takeover counts attempt 2 with a larger fence.
		f.clock.Advance(time.Second)
		c = f.acquireAsSuccessor("k", second, time.Second)
		assert.Equal(t, uint32(2), c.Record.Attempt)
		assert.Greater(t, c.Record.Fence, fence1)
		assert.True(t, c.Takeover())
		fence2 := c.Record.Fence

		// The first holder is fenced off: its late calls change nothing.
		assert.ErrorIs(t, f.s.Complete(ctx, "k", first, []byte("late"), time.Hour), store.ErrLeaseLost)
		assert.ErrorIs(t, f.s.Renew(ctx, "k", first, time.Hour), store.ErrLeaseLost)
		require.NoError(t, f.s.Release(ctx, "k", first))
		got, err := f.s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, second, got.Token)
		assert.Equal(t, store.StatusInProgress, got.Status)
		assert.Equal(t, uint32(2), got.Attempt)
		assert.Equal(t, fence2, got.Fence)

		// Another lapse: attempt 3. Even the holder's own claim after its
		// lease lapsed is a takeover.
		f.clock.Advance(time.Second)
		c = f.acquireAsSuccessor("k", third, time.Second)
		assert.Equal(t, uint32(3), c.Record.Attempt)
		f.clock.Advance(time.Second)
		c = f.acquireAsSuccessor("k", third, time.Second)
		assert.Equal(t, uint32(4), c.Record.Attempt)
		fence4 := c.Record.Fence

		// Complete keeps both; a replay reports them.
		require.NoError(t, f.s.Complete(ctx, "k", third, []byte("done"), time.Second))
		c = f.claim("k", store.NewToken(), time.Second)
		assert.Equal(t, store.Completed, c.Outcome)
		assert.Equal(t, uint32(4), c.Record.Attempt)
		assert.Equal(t, fence4, c.Record.Fence)

		// The retention ends: the next claim counts from 1, fence still grows.
		f.clock.Advance(time.Second)
		c = f.acquireAsSuccessor("k", first, time.Second)
		assert.Equal(t, uint32(1), c.Record.Attempt)
		assert.Greater(t, c.Record.Fence, fence4)

		// A release says the work had no effect: counted from 1 again.
		require.NoError(t, f.s.Release(ctx, "k", first))
		f.clock.Advance(time.Microsecond)
		c = f.acquireAsSuccessor("k", second, time.Second)
		assert.Equal(t, uint32(1), c.Record.Attempt)
		assert.False(t, c.Takeover())
	})
}

// The fence grows past the one it replaces even when the clock reads less
// than it (a clock set back): max(prev.Fence+1, now).
func TestFenceGrowsWhenClockGoesBack(t *testing.T) {
	orders(t, func(t *testing.T, f *fixture) {
		f.acquire("k", store.NewToken(), time.Second)
		// A fence from the future, as a clock set back would leave it.
		ahead := f.clock.Now().Add(time.Hour).UnixMicro()
		_, err := f.s.DB().Exec(`UPDATE idempotency_keys SET fence = ?1`, ahead)
		require.NoError(t, err)
		f.clock.Advance(time.Second)
		c := f.acquireAsSuccessor("k", store.NewToken(), time.Second)
		assert.Equal(t, uint64(ahead+1), c.Record.Fence)
		assert.Equal(t, uint32(2), c.Record.Attempt)
	})
}

// Claims grouped into one transaction by the write queue each get the
// Attempt and Fence of their own row.
func TestGroupedClaimsReportAttempts(t *testing.T) {
	f := newFixture(t, 0)
	s := f.s
	const n = 10
	for i := range n {
		f.acquire(fmt.Sprintf("k%d", i), store.NewToken(), time.Second)
	}
	f.clock.Advance(time.Second) // every lease lapses
	var (
		mu     sync.Mutex
		groups []int
	)
	s.onGroup = func(size int, committed bool) {
		mu.Lock()
		defer mu.Unlock()
		assert.True(t, committed)
		groups = append(groups, size)
	}
	queued := make(chan struct{}, 2*n)
	s.onWait = func() { queued <- struct{}{} }
	// Make every claim write first: a read first would queue behind the
	// gate only at its write, which is what we want as well.
	s.claimHint.Store(claimHintMax)
	release, done := holdGate(t, s)
	claims := make([]store.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			claims[i], errs[i] = s.Claim(t.Context(), fmt.Sprintf("k%d", i), "fp", store.NewToken(), time.Minute)
		})
	}
	for range n {
		<-queued
	}
	close(release)
	require.NoError(t, <-done)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, store.Acquired, claims[i].Outcome)
		assert.Equal(t, uint32(2), claims[i].Record.Attempt, "k%d", i)
		r := f.row(fmt.Sprintf("k%d", i))
		assert.Equal(t, int64(2), r.attempt)
		assert.Equal(t, uint64(r.fence), claims[i].Record.Fence, "k%d: the fence of its own row", i)
		assert.Equal(t, string(claims[i].Record.Token), r.token)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{n}, groups, "the claims ran as one group")
}

// Renew, case by case of the state table.
func TestRenewCases(t *testing.T) {
	const lease = time.Second
	cases := []struct {
		name string
		// setup leaves key in some state and returns the token to renew with.
		setup func(f *fixture, key string) store.Token
		ok    bool
	}{
		{"live own lease", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			f.clock.Advance(lease / 2)
			return tok
		}, true},
		{"absent", func(f *fixture, key string) store.Token { return store.NewToken() }, false},
		{"released", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			require.NoError(f.t, f.s.Release(f.t.Context(), key, tok))
			return tok
		}, false},
		{"lapsed own lease", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			f.clock.Advance(2 * lease)
			return tok
		}, false},
		{"own lease at the instant it lapses", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			f.clock.Advance(lease)
			return tok
		}, false},
		{"completed by the same token", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			require.NoError(f.t, f.s.Complete(f.t.Context(), key, tok, []byte("r"), time.Hour))
			return tok
		}, false},
		{"completed, retention over", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			require.NoError(f.t, f.s.Complete(f.t.Context(), key, tok, []byte("r"), lease))
			f.clock.Advance(2 * lease)
			return tok
		}, false},
		{"another token's live lease", func(f *fixture, key string) store.Token {
			f.acquire(key, store.NewToken(), lease)
			return store.NewToken()
		}, false},
		{"taken over from the token", func(f *fixture, key string) store.Token {
			tok := store.NewToken()
			f.acquire(key, tok, lease)
			f.clock.Advance(2 * lease)
			f.acquire(key, store.NewToken(), lease)
			return tok
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orders(t, func(t *testing.T, f *fixture) {
				ctx := t.Context()
				tok := tc.setup(f, "k")
				before := f.row("k")
				err := f.s.Renew(ctx, "k", tok, 3*lease)
				if !tc.ok {
					require.ErrorIs(t, err, store.ErrLeaseLost)
					assert.Contains(t, err.Error(), "sqlite: renew")
					assert.Equal(t, before, f.row("k"), "a refused renewal writes nothing")
					if !before.found {
						_, err := f.s.Get(ctx, "k")
						assert.ErrorIs(t, err, store.ErrNotFound, "a refused renewal creates nothing")
					}
					return
				}
				require.NoError(t, err)
				want := f.clock.Now().Add(3 * lease)
				got, err := f.s.Get(ctx, "k")
				require.NoError(t, err)
				assert.True(t, want.Equal(got.LockedUntil), "LockedUntil %v, want %v", got.LockedUntil, want)
				assert.True(t, want.Equal(got.ExpiresAt), "ExpiresAt %v, want %v", got.ExpiresAt, want)
				assert.Equal(t, tok, got.Token)
				assert.Equal(t, uint32(before.attempt), got.Attempt)
				assert.Equal(t, uint64(before.fence), got.Fence)
				// Past the first lease the key is still held.
				f.clock.Advance(2 * lease)
				assert.Equal(t, store.InProgress, f.claim("k", store.NewToken(), lease).Outcome)
			})
		})
	}
}

func TestRenewArguments(t *testing.T) {
	f := newFixture(t, 0)
	tok := store.NewToken()
	f.acquire("k", tok, time.Second)
	before := f.row("k")
	for _, tc := range []struct {
		name  string
		key   string
		tok   store.Token
		lease time.Duration
	}{
		{"zero lease", "k", tok, 0},
		{"negative lease", "k", tok, -time.Second},
		{"empty key", "", tok, time.Second},
		{"empty token", "k", "", time.Second},
		{"key with NUL", "k\x00", tok, time.Second},
	} {
		err := f.s.Renew(t.Context(), tc.key, tc.tok, tc.lease)
		assert.ErrorIs(t, err, store.ErrInvalid, tc.name)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, f.s.Renew(ctx, "k", tok, time.Minute), context.Canceled)
	assert.Equal(t, before, f.row("k"), "nothing written")
}

// Renew in a transaction renews within it: kept by a commit, undone by a
// rollback.
func TestRenewInTx(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	tok := store.NewToken()
	errRollback := errors.New("roll back")
	err := f.s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		c, err := st.Claim(ctx, "k", "fp", tok, time.Second)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		assert.Equal(t, uint32(1), c.Record.Attempt)
		require.NoError(t, st.Renew(ctx, "k", tok, time.Hour))
		assert.ErrorIs(t, st.Renew(ctx, "absent", tok, time.Hour), store.ErrLeaseLost)
		// The Store itself, with the context, runs in the transaction too.
		require.NoError(t, f.s.Renew(ctx, "k", tok, time.Hour))
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now().Add(time.Hour).UnixMicro(), f.row("k").expires, "the renewal committed")
	assert.False(t, f.row("absent").found)

	before := f.row("k")
	err = f.s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		require.NoError(t, st.Renew(ctx, "k", tok, 2*time.Hour))
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	assert.Equal(t, before, f.row("k"), "the renewal rolled back")

	// A takeover inside a transaction counts its attempt; a rollback puts
	// the old row back.
	f.clock.Advance(2 * time.Hour)
	err = f.s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		c, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Second)
		require.NoError(t, err)
		assert.Equal(t, store.Acquired, c.Outcome)
		assert.Equal(t, uint32(2), c.Record.Attempt)
		assert.Greater(t, c.Record.Fence, uint64(before.fence))
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	assert.Equal(t, before, f.row("k"))
}

// A renewal that arrives after the release leaves the key free: the next
// claim acquires it as a fresh one (attempt 1).
func TestRenewAfterRelease(t *testing.T) {
	orders(t, func(t *testing.T, f *fixture) {
		ctx := t.Context()
		tok := store.NewToken()
		f.acquire("k", tok, time.Minute)
		require.NoError(t, f.s.Release(ctx, "k", tok))
		assert.ErrorIs(t, f.s.Renew(ctx, "k", tok, time.Minute), store.ErrLeaseLost)
		assert.False(t, f.row("k").found, "the late renewal brought nothing back")
		c := f.acquireAsSuccessor("k", store.NewToken(), time.Minute)
		assert.Equal(t, uint32(1), c.Record.Attempt)
	})
}

// Release and a heartbeat of the same holder race on many keys, with real
// goroutines and the real clock (so writes group): whatever the order, the
// key ends free, and the next claim acquires it with attempt 1.
func TestRenewRacesRelease(t *testing.T) {
	for _, name := range []string{"file", "memory"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "race.db")
			if name == "memory" {
				path = ":memory:"
			}
			s, err := Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			require.NoError(t, s.Migrate(t.Context()))
			ctx := t.Context()
			const keys = 200
			toks := make([]store.Token, keys)
			for i := range keys {
				toks[i] = store.NewToken()
				c, err := s.Claim(ctx, fmt.Sprintf("k%d", i), "fp", toks[i], time.Minute)
				require.NoError(t, err)
				require.Equal(t, store.Acquired, c.Outcome)
			}
			var (
				wg            sync.WaitGroup
				mu            sync.Mutex
				renewed, lost int
			)
			start := make(chan struct{})
			for i := range keys {
				key := fmt.Sprintf("k%d", i)
				wg.Go(func() {
					<-start
					assert.NoError(t, s.Release(ctx, key, toks[i]))
				})
				wg.Go(func() {
					<-start
					// A heartbeat: a few renewals, the last ones surely
					// after the release.
					for range 3 {
						err := s.Renew(ctx, key, toks[i], time.Minute)
						mu.Lock()
						switch {
						case err == nil:
							renewed++
						case errors.Is(err, store.ErrLeaseLost):
							lost++
						default:
							t.Errorf("renew %s: %v", key, err)
						}
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			t.Logf("renewals: %d before the release, %d refused after it", renewed, lost)
			assert.Positive(t, lost)
			var left int
			require.NoError(t, s.DB().QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&left))
			assert.Zero(t, left, "every key is free after its release, whatever the renewals did")
			for i := range keys {
				c, err := s.Claim(ctx, fmt.Sprintf("k%d", i), "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
				assert.Equal(t, store.Acquired, c.Outcome)
				assert.Equal(t, uint32(1), c.Record.Attempt)
			}
		})
	}
}

// Release gives up only a live lease: a lapsed one stays, and the claim
// that takes it over counts it.
func TestReleaseLeavesLapsedLease(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	tok := store.NewToken()
	f.acquire("k", tok, time.Second)
	f.clock.Advance(time.Second)
	before := f.row("k")
	require.NoError(t, f.s.Release(ctx, "k", tok))
	assert.Equal(t, before, f.row("k"), "the lapsed lease stays")
	e, err := f.s.Lookup(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, store.StateLapsed, e.State)
	assert.Equal(t, uint32(1), e.Attempt)
	_, err = f.s.Get(ctx, "k")
	assert.ErrorIs(t, err, store.ErrNotFound, "a lapsed record is absent to Get")
	c := f.acquireAsSuccessor("k", store.NewToken(), time.Second)
	assert.Equal(t, uint32(2), c.Record.Attempt)
}

// Purge deletes a completed record once its retention is over, but keeps
// a lapsed lease store.LapsedKept after it lapsed, to the microsecond.
func TestPurgeKeepsLapsedRecords(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	tok := store.NewToken()
	f.acquire("lapsed", store.NewToken(), time.Second)
	f.acquire("taken-over", store.NewToken(), time.Second)
	f.acquire("expired", tok, time.Second)
	require.NoError(t, f.s.Complete(ctx, "expired", tok, []byte("r"), time.Second))
	f.acquire("live", store.NewToken(), 48*time.Hour)
	f.clock.Advance(time.Second) // "lapsed" and "taken-over" lapse, "expired" expires

	n, err := f.s.Purge(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "only the expired completed record")
	assert.False(t, f.row("expired").found)
	assert.True(t, f.row("lapsed").found)
	assert.True(t, f.row("live").found)

	// A takeover after the purge still counts the lapsed attempt.
	c := f.acquireAsSuccessor("taken-over", store.NewToken(), time.Second)
	assert.Equal(t, uint32(2), c.Record.Attempt)
	counts, err := f.s.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), counts.Lapsed)
	page, err := f.s.List(ctx, store.ListOptions{State: store.StateLapsed})
	require.NoError(t, err)
	require.Len(t, page.Entries, 1)
	assert.Equal(t, "lapsed", page.Entries[0].Key)
	assert.Equal(t, uint32(1), page.Entries[0].Attempt)

	// One microsecond before the lapsed lease is LapsedKept old: kept.
	f.clock.Advance(store.LapsedKept - time.Microsecond)
	n, err = f.s.Purge(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "both lapsed leases are younger than LapsedKept")
	assert.True(t, f.row("lapsed").found)
	f.clock.Advance(time.Microsecond)
	n, err = f.s.Purge(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.False(t, f.row("lapsed").found, "deleted once its lease is LapsedKept old")
	assert.True(t, f.row("taken-over").found, "its second lease ended a second later")
	assert.True(t, f.row("live").found)
	// After that a claim counts from 1 again.
	c = f.acquireAsSuccessor("lapsed", store.NewToken(), time.Second)
	assert.Equal(t, uint32(1), c.Record.Attempt)
}
