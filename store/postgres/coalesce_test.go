package postgres

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/coalesce"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// blocker holds a Store's only batch slot of one kind: its call, run alone,
// waits in the slot until released, so the calls started meanwhile queue
// and run together as one batch when it ends.
type blocker struct {
	key      string
	entered  chan struct{}
	released chan struct{}
}

func newBlocker(key string) *blocker {
	return &blocker{key: key, entered: make(chan struct{}, 1), released: make(chan struct{})}
}

func (b *blocker) hold(key string) {
	if key == b.key {
		b.entered <- struct{}{}
		<-b.released
	}
}

// gateClaims gives s one claim slot whose call for bl.key waits for bl.
func gateClaims(s *Store, bl *blocker) {
	s.batch.claims = coalesce.New(1, 64, func(ctx context.Context, q claimReq) (inserted, error) {
		bl.hold(q.key)
		return s.insertOne(ctx, q)
	}, s.insertMany)
}

// gateCompletes gives s one complete slot whose call for bl.key waits for bl.
func gateCompletes(s *Store, bl *blocker) {
	s.batch.completes = coalesce.New(1, 64, func(ctx context.Context, q completeReq) (completed, error) {
		bl.hold(q.key)
		return s.completeOne(ctx, q)
	}, s.completeMany)
}

// inOneBatch runs the blocker's call (through run(bl.key)) in the only
// slot, then the n calls run(i) meanwhile, and releases the slot once every
// one of them has started. It reports whether the n calls ran as one batch
// of n (a call that reached the queue only after the release runs in a
// later batch or alone; callers retry with fresh keys, since what they
// check must hold either way).
func inOneBatch(t *testing.T, b interface{ Stats() (int64, int64) }, bl *blocker, n int, run func(i int)) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(-1)
	}()
	<-bl.entered
	b0, c0 := b.Stats()
	var started, wg sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			run(i)
		}()
	}
	started.Wait()
	for range 1000 {
		runtime.Gosched() // let the callers reach the queue
	}
	close(bl.released)
	wg.Wait()
	<-done
	b1, c1 := b.Stats()
	return b1-b0 == 1 && c1-c0 == int64(n)
}

// seed writes rows directly: key → (fingerprint, token, status, response,
// expires in).
type seedRow struct {
	key, fp string
	tok     store.Token
	status  int16
	resp    []byte
	in      time.Duration
}

func seed(t *testing.T, s *Store, rows ...seedRow) {
	t.Helper()
	for _, r := range rows {
		_, err := s.db.Exec(context.Background(), `INSERT INTO `+s.Table()+` (key, fingerprint, token, status, response, expires_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6::interval)`, r.key, r.fp, string(r.tok), r.status, r.resp, interval(r.in))
		require.NoError(t, err)
	}
}

// TestCoalescedClaims runs, as one batch, claims of new keys, of a new key
// claimed twice, of a completed key, of keys held by another token (live
// and lapsed), of the caller's own live lease and of a key used with
// another fingerprint: each caller gets the outcome its claim alone would
// have given.
func TestCoalescedClaims(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	ctx := context.Background()
	other, own := store.NewToken(), store.NewToken()
	batched := false
	for attempt := 0; attempt < 20 && !batched; attempt++ {
		p := "a" + strconv.Itoa(attempt) + "-"
		bl := newBlocker(p + "blocker")
		gateClaims(s, bl)
		seed(t, s,
			seedRow{p + "done", "fp", other, statusCompleted, []byte("first"), time.Hour},
			seedRow{p + "held", "fp", other, statusInProgress, nil, time.Hour},
			seedRow{p + "lapsed", "fp", other, statusInProgress, nil, -time.Second},
			seedRow{p + "own", "fp", own, statusInProgress, nil, time.Second},
			seedRow{p + "mism", "other-fp", other, statusCompleted, []byte("x"), time.Hour},
		)
		type call struct {
			key string
			tok store.Token
		}
		calls := []call{
			{p + "new1", store.NewToken()}, {p + "new2", store.NewToken()}, {p + "new3", store.NewToken()},
			{p + "dup", store.NewToken()}, {p + "dup", store.NewToken()},
			{p + "done", store.NewToken()}, {p + "held", store.NewToken()}, {p + "lapsed", store.NewToken()},
			{p + "own", own}, {p + "mism", store.NewToken()},
		}
		got := make([]store.Claim, len(calls))
		errs := make([]error, len(calls))
		batched = inOneBatch(t, s.batch.claims, bl, len(calls), func(i int) {
			if i < 0 {
				_, err := s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
				return
			}
			got[i], errs[i] = s.Claim(ctx, calls[i].key, "fp", calls[i].tok, time.Minute)
		})
		for i, c := range calls {
			require.NoError(t, errs[i], c.key)
		}
		want := func(i int, o store.Outcome) store.Record {
			t.Helper()
			require.Equal(t, o, got[i].Outcome, calls[i].key)
			require.Equal(t, calls[i].key, got[i].Record.Key)
			return got[i].Record
		}
		for _, i := range []int{0, 1, 2, 7, 8} { // new, lapsed (taken over), own (renewed)
			r := want(i, store.Acquired)
			require.Equal(t, calls[i].tok, r.Token)
			require.Equal(t, store.StatusInProgress, r.Status)
			require.WithinDuration(t, time.Now().Add(time.Minute), r.LockedUntil, 5*time.Second)
			stored, err := s.Get(ctx, calls[i].key)
			require.NoError(t, err)
			require.Equal(t, calls[i].tok, stored.Token)
			require.Equal(t, r.Attempt, stored.Attempt)
			require.Equal(t, r.Fence, stored.Fence)
			wantAttempt := uint32(1)
			switch i {
			case 7: // the lapsed lease, taken over
				wantAttempt = 2
				require.Positive(t, r.Fence)
			case 8: // the own lease, seeded with the columns' defaults, kept
				wantAttempt = 0
				require.Zero(t, r.Fence)
			default: // new keys
				require.Positive(t, r.Fence)
			}
			require.Equal(t, wantAttempt, r.Attempt, calls[i].key)
		}
		// The key claimed twice: one acquires, the other finds it held.
		win, lose := 3, 4
		if got[4].Outcome == store.Acquired {
			win, lose = 4, 3
		}
		want(win, store.Acquired)
		require.Equal(t, calls[win].tok, want(lose, store.InProgress).Token)
		r := want(5, store.Completed)
		require.Equal(t, []byte("first"), r.Response)
		require.Equal(t, other, r.Token)
		require.Equal(t, other, want(6, store.InProgress).Token)
		require.Equal(t, "other-fp", want(9, store.Mismatch).Fingerprint)
	}
	require.True(t, batched, "the claims never ran as one batch")
}

// TestCoalescedCompletes runs, as one batch, Completes of live leases, of a
// lapsed one, of a key completed by the same token (a retry), of a key held
// by another token, of an absent key and two of one key: each gets what its
// Complete alone would have, and a completed response never changes.
func TestCoalescedCompletes(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	ctx := context.Background()
	batched := false
	for attempt := 0; attempt < 20 && !batched; attempt++ {
		p := "a" + strconv.Itoa(attempt) + "-"
		bl := newBlocker(p + "blocker")
		gateCompletes(s, bl)
		tok := []store.Token{store.NewToken(), store.NewToken(), store.NewToken(), store.NewToken(), store.NewToken(), store.NewToken()}
		seed(t, s,
			seedRow{p + "live1", "fp", tok[0], statusInProgress, nil, time.Minute},
			seedRow{p + "live2", "fp", tok[1], statusInProgress, nil, time.Minute},
			seedRow{p + "lapsed", "fp", tok[2], statusInProgress, nil, -time.Second},
			seedRow{p + "again", "fp", tok[3], statusCompleted, []byte("first"), time.Hour},
			seedRow{p + "other", "fp", store.NewToken(), statusInProgress, nil, time.Minute},
			seedRow{p + "twice", "fp", tok[5], statusInProgress, nil, time.Minute},
			seedRow{p + "blocker", "fp", tok[4], statusInProgress, nil, time.Minute},
		)
		type call struct {
			key  string
			tok  store.Token
			resp string
			want error
		}
		calls := []call{
			{p + "live1", tok[0], "r1", nil},
			{p + "live2", tok[1], "", nil},
			{p + "lapsed", tok[2], "r", store.ErrLeaseLost},
			{p + "again", tok[3], "second", nil},
			{p + "other", tok[4], "r", store.ErrLeaseLost},
			{p + "absent", tok[4], "r", store.ErrLeaseLost},
			{p + "twice", tok[5], "t1", nil},
			{p + "twice", tok[5], "t2", nil},
		}
		errs := make([]error, len(calls))
		batched = inOneBatch(t, s.batch.completes, bl, len(calls), func(i int) {
			if i < 0 {
				require.NoError(t, s.Complete(ctx, bl.key, tok[4], []byte("b"), time.Hour))
				return
			}
			var resp []byte
			if calls[i].resp != "" {
				resp = []byte(calls[i].resp)
			}
			errs[i] = s.Complete(ctx, calls[i].key, calls[i].tok, resp, time.Hour)
		})
		for i, c := range calls {
			if c.want == nil {
				require.NoError(t, errs[i], c.key)
			} else {
				require.ErrorIs(t, errs[i], c.want, c.key)
			}
		}
		for key, resp := range map[string]string{"live1": "r1", "live2": "", "again": "first"} {
			r, err := s.Get(ctx, p+key)
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, r.Status, key)
			require.Equal(t, []byte(resp), r.Response, key)
		}
		r, err := s.Get(ctx, p+"twice")
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, r.Status)
		require.Contains(t, []string{"t1", "t2"}, string(r.Response))
		r, err = s.Get(ctx, p+"other")
		require.NoError(t, err)
		require.Equal(t, store.StatusInProgress, r.Status)
		_, err = s.Get(ctx, p+"absent")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	require.True(t, batched, "the completes never ran as one batch")
}

// TestCoalescedOneKey: ten parallel claims of one new key with ten tokens,
// in one batch, and ten more without a gate: exactly one of each acquires.
func TestCoalescedOneKey(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	ctx := context.Background()
	batched := false
	for attempt := 0; attempt < 20 && !batched; attempt++ {
		key := "one-" + strconv.Itoa(attempt)
		bl := newBlocker(key + "-blocker")
		gateClaims(s, bl)
		got := make([]store.Claim, 10)
		toks := make([]store.Token, 10)
		for i := range toks {
			toks[i] = store.NewToken()
		}
		batched = inOneBatch(t, s.batch.claims, bl, 10, func(i int) {
			if i < 0 {
				_, err := s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
				return
			}
			var err error
			got[i], err = s.Claim(ctx, key, "fp", toks[i], time.Minute)
			require.NoError(t, err)
		})
		winner := -1
		for i, c := range got {
			if c.Outcome == store.Acquired {
				require.Equal(t, -1, winner, "two claims acquired %s", key)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner)
		for i, c := range got {
			if i != winner {
				require.Equal(t, store.InProgress, c.Outcome)
				require.Equal(t, toks[winner], c.Record.Token)
			}
		}
	}
	require.True(t, batched, "the claims never ran as one batch")
}

// TestCoalescedCancelled: a caller whose context ends while its claim is
// queued gets the context's error and claims nothing; the rest of the batch
// acquires.
func TestCoalescedCancelled(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	ctx := context.Background()
	bl := newBlocker("blocker")
	gateClaims(s, bl)
	go func() {
		_, _ = s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
	}()
	<-bl.entered
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, err := s.Claim(cctx, "cancelled", "fp", store.NewToken(), time.Minute)
		gone <- err
	}()
	var wg sync.WaitGroup
	got := make([]store.Claim, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			got[i], err = s.Claim(ctx, "k"+strconv.Itoa(i), "fp", store.NewToken(), time.Minute)
			require.NoError(t, err)
		}()
	}
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	close(bl.released)
	wg.Wait()
	for i, c := range got {
		require.Equal(t, store.Acquired, c.Outcome, i)
	}
	_, err := s.Get(ctx, "cancelled")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestCoalescedBatchKilled: the connection running a batch is terminated
// (pg_terminate_backend) while the batch waits on a key an open
// transaction inserted: every caller of the batch gets an error, none an
// outcome, and none of the batch's keys is claimed.
func TestCoalescedBatchKilled(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, s.sql.claim, "locked", "fp", string(store.NewToken()), interval(time.Minute))
	require.NoError(t, err)

	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 20, "the claims never ran as one batch")
		p := "a" + strconv.Itoa(attempt) + "-"
		bl := newBlocker(p + "blocker")
		gateClaims(s, bl)
		keys := []string{p + "k1", p + "k2", "locked", p + "k3"}
		errs := make([]error, len(keys))
		outcomes := make([]store.Outcome, len(keys))
		killed := make(chan error, 1)
		go func() { killed <- killBatch(ctx, pool, s) }()
		batched := inOneBatch(t, s.batch.claims, bl, len(keys), func(i int) {
			if i < 0 {
				_, err := s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
				return
			}
			var c store.Claim
			c, errs[i] = s.Claim(ctx, keys[i], "fp", store.NewToken(), time.Minute)
			outcomes[i] = c.Outcome
		})
		require.NoError(t, <-killed)
		if !batched {
			continue // a lone claim of "locked" was killed, or none: again
		}
		for i, key := range keys {
			requireDriverError(t, errs[i], "claim")
			require.Zero(t, outcomes[i], key)
		}
		for _, key := range keys[:2] {
			_, err := s.Get(ctx, key)
			require.ErrorIs(t, err, store.ErrNotFound, key)
		}
		return
	}
}

// killBatch waits (up to 10s) for a statement on s's table waiting for a
// lock and terminates its backend.
func killBatch(ctx context.Context, pool DB, s *Store) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var killed bool
		err := pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO ' || $1 || '%' LIMIT 1`, s.Table()).Scan(&killed)
		if err == nil && killed {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		time.Sleep(10 * time.Millisecond) // the server's state is the subject
	}
	return errors.New("no claim waited for the lock")
}

// rowFailDB fails every multi-row claim with a data exception, as the
// server would for a row it cannot store.
type rowFailDB struct{ DB }

func (d rowFailDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "unnest(") {
		return nil, &pgconn.PgError{Code: "22021", Message: "invalid byte sequence"}
	}
	return d.DB.Query(ctx, sql, args...)
}

// TestCoalescedRowError: when the server rejects a batch for one row's data,
// every call of the batch runs again alone, so the others still get their
// own outcomes.
func TestCoalescedRowError(t *testing.T) {
	pool := testPool(t)
	base := newTestStore(t, pool)
	s, err := New(rowFailDB{pool}, WithTable(strings.Trim(base.Table(), `"`)), WithCoalescing(true))
	require.NoError(t, err)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 20, "the claims never ran as one batch")
		p := "a" + strconv.Itoa(attempt) + "-"
		bl := newBlocker(p + "blocker")
		gateClaims(s, bl)
		got := make([]store.Claim, 5)
		errs := make([]error, 5)
		batched := inOneBatch(t, s.batch.claims, bl, 5, func(i int) {
			if i < 0 {
				_, err := s.Claim(ctx, bl.key, "fp", store.NewToken(), time.Minute)
				require.NoError(t, err)
				return
			}
			got[i], errs[i] = s.Claim(ctx, p+strconv.Itoa(i), "fp", store.NewToken(), time.Minute)
		})
		for i := range got {
			require.NoError(t, errs[i])
			require.Equal(t, store.Acquired, got[i].Outcome)
		}
		if batched {
			return
		}
	}
}

// TestConformanceCoalescing runs the suite on Stores with one batch slot of
// each kind, so its concurrent cases queue and run in batches, and checks
// that they did.
func TestConformanceCoalescing(t *testing.T) {
	pool := testPool(t)
	var mu sync.Mutex
	var stores []*Store
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			s := newTestStore(t, pool, WithCoalescing(true), func(o *options) error { o.slots = 1; return nil })
			mu.Lock()
			stores = append(stores, s)
			mu.Unlock()
			return withEffects(t, pool, storetest.Subject{Store: s})
		},
	})
	var batches int64
	for _, s := range stores {
		b, _ := batchStats(s)
		batches += b
	}
	require.Positive(t, batches, "no call of the suite ran in a batch")
}

// TestTxNotCoalesced: calls inside InTx run in the transaction, never in a
// batch, and a Store does not coalesce by default.
func TestTxNotCoalesced(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool, WithCoalescing(true))
	require.NotNil(t, s.batch)
	ctx := context.Background()
	err := s.InTx(ctx, func(ctx context.Context, bound store.Store) error {
		require.False(t, s.coalescing(ctx))
		require.Nil(t, bound.(*Store).batch)
		return nil
	})
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	one, err := New(conn)
	require.NoError(t, err)
	require.Nil(t, one.batch)
	off, err := New(pool, WithCoalescing(true), WithCoalescing(false))
	require.NoError(t, err)
	require.Nil(t, off.batch)
}
