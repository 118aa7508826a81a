package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// holdGate runs an InTx that holds the Store's gate until release is closed,
// and returns once it holds it.
func holdGate(t *testing.T, s *Store) (release chan struct{}, done chan error) {
	t.Helper()
	held := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.InTx(t.Context(), func(context.Context, store.Store) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	return release, done
}

// Writes that queue up while the gate is held run together in one
// transaction once it opens, and each caller gets its own result.
func TestWritesQueuedTogetherRunInOneTransaction(t *testing.T) {
	s := newTestStore(t)
	const n = 20
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
	queued := make(chan struct{}, n)
	s.onWait = func() { queued <- struct{}{} }
	release, done := holdGate(t, s)

	results := make([]store.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = s.Claim(t.Context(), fmt.Sprintf("k%d", i%10), "fp", store.NewToken(), time.Minute)
		})
	}
	for range n {
		<-queued // every Claim is waiting behind the transaction
	}
	close(release)
	require.NoError(t, <-done)
	wg.Wait()

	acquired := map[string]int{}
	for i := range n {
		require.NoError(t, errs[i])
		if results[i].Outcome == store.Acquired {
			acquired[fmt.Sprintf("k%d", i%10)]++
		} else {
			assert.Equal(t, store.InProgress, results[i].Outcome)
		}
	}
	assert.Len(t, acquired, 10, "every key has a holder")
	for k, c := range acquired {
		assert.Equal(t, 1, c, "one holder for %s", k)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{n}, groups, "all twenty statements ran in one transaction")
}

// When one statement of a group fails on its own account, the group rolls
// back and the others run again: they succeed, the failing one alone reports
// its error.
func TestFailedGroupRunsEachAlone(t *testing.T) {
	s := newTestStore(t)
	var committed []bool
	s.onGroup = func(_ int, ok bool) { committed = append(committed, ok) }
	queued := make(chan struct{}, 4)
	s.onWait = func() { queued <- struct{}{} }
	release, done := holdGate(t, s)

	var wg sync.WaitGroup
	errs := make([]error, 3)
	outcomes := make([]store.Outcome, 3)
	for i := range 2 {
		wg.Go(func() {
			c, err := s.Claim(t.Context(), fmt.Sprintf("good%d", i), "fp", store.NewToken(), time.Minute)
			outcomes[i], errs[i] = c.Outcome, err
		})
	}
	wg.Go(func() {
		// LIMIT 'many' is a datatype mismatch: this statement fails.
		_, errs[2] = s.submit(t.Context(), stmtPurge, []any{int64(0), "many", int64(0)}, nil)
	})
	for range 3 {
		<-queued
	}
	close(release)
	require.NoError(t, <-done)
	wg.Wait()

	assert.Equal(t, []bool{false, true}, committed, "the group failed, the rest committed as a group")
	for i := range 2 {
		require.NoError(t, errs[i])
		assert.Equal(t, store.Acquired, outcomes[i])
		_, err := s.Get(t.Context(), fmt.Sprintf("good%d", i))
		assert.NoError(t, err, "the good statements ran again and committed")
	}
	assert.ErrorContains(t, errs[2], "datatype mismatch")
}

// A caller whose context ends while it waits in the queue leaves it at once,
// and its statement never runs.
func TestQueuedWriteCancelled(t *testing.T) {
	s := newTestStore(t)
	queued := make(chan struct{}, 1)
	s.onWait = func() { queued <- struct{}{} }
	release, done := holdGate(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		errc <- err
	}()
	<-queued
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	close(release)
	require.NoError(t, <-done)
	_, err := s.Get(t.Context(), "k")
	assert.ErrorIs(t, err, store.ErrNotFound, "the cancelled Claim did not run")
}

// When another process holds SQLite's write lock past the busy timeout, a
// group fails once and every caller in it gets the busy error: the Store
// does not retry them one by one, each waiting the timeout again.
func TestBusyGroupFailsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	const timeout = 2 * time.Second
	s, err := Open(path, WithBusyTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	var groups []bool
	s.onGroup = func(_ int, ok bool) { groups = append(groups, ok) }
	const n = 5
	queued := make(chan struct{}, n)
	s.onWait = func() { queued <- struct{}{} }

	other, err := sql.Open("sqlite", path) // another process
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })

	s.gate <- struct{}{} // hold the Store's gate while the writes queue up
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Claim(t.Context(), fmt.Sprintf("k%d", i), "fp", store.NewToken(), time.Minute)
		})
	}
	for range n {
		<-queued
	}
	_, err = conn.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	start := time.Now()
	s.unlock()
	wg.Wait()
	elapsed := time.Since(start)
	_, err = conn.ExecContext(t.Context(), "ROLLBACK")
	require.NoError(t, err)

	assert.Equal(t, []bool{false}, groups, "one group, failed once")
	assert.Less(t, elapsed, 3*timeout, "one busy timeout for the group, not one per statement (%v)", n*timeout)
	for i, err := range errs {
		require.Error(t, err, "claim %d", i)
		assert.True(t, isBusy(err), "claim %d: %v", i, err)
		assert.NotErrorIs(t, err, store.ErrLeaseLost)
	}
	// The lock released, the Store works again.
	c, err := s.Claim(t.Context(), "k0", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, c.Outcome)
}
