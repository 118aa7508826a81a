package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestTxJoinsOnlyItsOwn: a Store's methods run in a transaction carried by
// ctx only when that Store began it. Another Store on the same table, given
// the first Store's transaction context, works on its own connection: it
// does not see the uncommitted claim as its own and is not rolled back.
func TestTxJoinsOnlyItsOwn(t *testing.T) {
	a := newTestStore(t, testDB(t))
	b, err := New(testDB(t), WithTable(unquoted(a.Table())))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	tok := store.NewToken()
	err = a.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		_, ok := TxFrom(ctx)
		require.True(t, ok)
		c, err := a.Claim(ctx, "mine", "fp", tok, time.Minute) // a joins its own transaction
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		r, err := st.Get(ctx, "mine")
		require.NoError(t, err, "the bound store sees the claim a made in the transaction")
		assert.Equal(t, tok, r.Token)
		// b does not join a's transaction: it autocommits its own key...
		c, err = b.Claim(ctx, "theirs", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		// ...and it cannot see a's uncommitted row (a consistent read).
		_, err = b.Get(ctx, "mine")
		assert.ErrorIs(t, err, store.ErrNotFound)
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	_, err = a.Get(t.Context(), "mine")
	assert.ErrorIs(t, err, store.ErrNotFound, "a's claim rolled back")
	_, err = a.Get(t.Context(), "theirs")
	assert.NoError(t, err, "b's claim autocommitted outside a's transaction")
	_, ok := TxFrom(t.Context())
	assert.False(t, ok)
}

func unquoted(quoted string) string { return quoted[1 : len(quoted)-1] }

// TestNestedInTxSavepoint: InTx inside InTx runs in a SAVEPOINT: an error
// undoes only the inner work, nil keeps it for the outer commit.
func TestNestedInTxSavepoint(t *testing.T) {
	s := newTestStore(t, testDB(t))
	outer, kept, undone := store.NewToken(), store.NewToken(), store.NewToken()
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		if _, err := st.Claim(ctx, "outer", "fp", outer, time.Minute); err != nil {
			return err
		}
		err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			if _, err := st.Claim(ctx, "undone", "fp", undone, time.Minute); err != nil {
				return err
			}
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		_, err = st.Get(ctx, "undone")
		require.ErrorIs(t, err, store.ErrNotFound, "rolled back to the savepoint")
		require.NoError(t, s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			_, err := st.Claim(ctx, "kept", "fp", kept, time.Minute)
			return err
		}))
		return st.Complete(ctx, "outer", outer, []byte("r"), time.Hour)
	})
	require.NoError(t, err)
	r, err := s.Get(t.Context(), "kept")
	require.NoError(t, err)
	assert.Equal(t, kept, r.Token)
	r, err = s.Get(t.Context(), "outer")
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, r.Status)
	_, err = s.Get(t.Context(), "undone")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// TestClaimBlockedReturnsOnCancel: a Claim waiting for the row lock of
// another transaction returns promptly with ctx's error when ctx ends. The
// driver closes the connection but does not kill the statement, so the
// server may still run the abandoned INSERT once the lock is free (see the
// package documentation): the key is then held by the abandoned token until
// its lease lapses, and free after that.
func TestClaimBlockedReturnsOnCancel(t *testing.T) {
	s := newTestStore(t, testDB(t))
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
			if _, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); err != nil {
				return err
			}
			close(holding)
			<-release
			return errRollback
		})
	}()
	<-holding
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	const lease = 300 * time.Millisecond
	abandoned := store.NewToken()
	_, err := s.Claim(ctx, "k", "fp", abandoned, lease)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	close(release)
	require.ErrorIs(t, <-done, errRollback)
	c, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	if c.Outcome != store.Acquired {
		require.Equal(t, store.InProgress, c.Outcome)
		assert.Equal(t, abandoned, c.Record.Token, "only the abandoned claim may hold the key")
		time.Sleep(lease + 100*time.Millisecond) // its lease runs out on the server's clock
		c, err = s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Acquired, c.Outcome, "after the abandoned lease lapsed the key is free")
	}
}

// TestInTxBadInput: a nil fn is refused, a cancelled context begins nothing.
func TestInTxBadInput(t *testing.T) {
	s := newTestStore(t, testDB(t))
	assert.ErrorIs(t, s.InTx(t.Context(), nil), store.ErrInvalid)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := s.InTx(ctx, func(context.Context, store.Store) error { called = true; return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
}

// TestConcurrentMigrate: eight processes' worth of Migrate on one new table
// at once all succeed, and Migrate again is a no-op.
func TestConcurrentMigrate(t *testing.T) {
	db := openDB(t, 8, nil)
	s, err := New(db, WithTable(uniqueName("idemkit_my_mig_")))
	require.NoError(t, err)
	dropOnCleanup(t, s)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = s.Migrate(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(t.Context()))
	c, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, c.Outcome)
}

// TestOptions: bad options fail New and Schema with a clear error; a table
// name that needs quoting works.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"empty table", []Option{WithTable("")}},
		{"long table", []Option{WithTable(strings.Repeat("t", maxTableLen+1))}},
		{"NUL", []Option{WithTable("a\x00b")}},
		{"trailing space", []Option{WithTable("keys ")}},
		{"emoji", []Option{WithTable("keys😀")}},
		{"purge batch", []Option{WithPurgeBatch(0)}},
	} {
		_, err := New(testDBOrNil(), tc.opts...)
		assert.ErrorIs(t, err, store.ErrInvalid, tc.name)
		_, err = Schema(tc.opts...)
		assert.ErrorIs(t, err, store.ErrInvalid, tc.name)
	}
	_, err := New(nil)
	assert.ErrorIs(t, err, store.ErrInvalid)

	db := testDB(t)
	s, err := New(db, WithTable("my `kéys`; drop "+uniqueName("")))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	dropOnCleanup(t, s)
	c, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, c.Outcome)
}

// testDBOrNil returns a *sql.DB that is never used (New does not touch it).
func testDBOrNil() *sql.DB { return new(sql.DB) }

// TestPurgeBatches: Purge deletes in batches of WithPurgeBatch and leaves
// live rows.
func TestPurgeBatches(t *testing.T) {
	s := newTestStore(t, testDB(t), WithPurgeBatch(3))
	ctx := t.Context()
	for i := range 10 {
		key, tok := "gone"+string(rune('a'+i)), store.NewToken()
		_, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, key, tok, []byte("r"), time.Millisecond))
	}
	live := store.NewToken()
	_, err := s.Claim(ctx, "live", "fp", live, time.Minute)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // the retentions run out on the server's clock
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 10, n)
	var left int
	require.NoError(t, testDB(t).QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.Table()).Scan(&left))
	assert.Equal(t, 1, left)
	_, err = s.Get(ctx, "live")
	assert.NoError(t, err)
	assert.False(t, errors.Is(err, store.ErrNotFound))
}

// TestInTxPreparesForThePool: a workload of transactions only still
// prepares each statement once for the pool (not once per transaction), and
// on a pool whose only connection the transaction holds, InTx prepares on
// that connection instead of waiting forever for a second one.
func TestInTxPreparesForThePool(t *testing.T) {
	for _, conns := range []int{4, 1} {
		db := openDB(t, conns, nil)
		s := newTestStore(t, db)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		tok := store.NewToken()
		err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
			if _, err := st.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
				return err
			}
			return st.Complete(ctx, "k", tok, []byte("r"), time.Hour)
		})
		cancel()
		require.NoError(t, err, "%d connections", conns)
		cached := s.stmts.prep[stmtInsert].Load() != nil
		assert.Equal(t, conns > 1, cached, "%d connections: the INSERT prepared for the pool", conns)
	}
}

// TestMigrateChecksTheTable: Migrate refuses a table of the same name that
// would not keep keys byte for byte, or lacks what the Store needs.
func TestMigrateChecksTheTable(t *testing.T) {
	db := testDB(t)
	for _, tc := range []struct{ name, ddl, want string }{
		{"case-insensitive key", "(`key` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, fingerprint VARBINARY(1024) NOT NULL, token VARBINARY(128) NOT NULL, status TINYINT NOT NULL, response LONGBLOB, expires_at DATETIME(6) NOT NULL)", `column "key" is varchar`},
		{"short key", "(`key` VARBINARY(255) PRIMARY KEY, fingerprint VARBINARY(1024) NOT NULL, token VARBINARY(128) NOT NULL, status TINYINT NOT NULL, response LONGBLOB, expires_at DATETIME(6) NOT NULL)", "holds 255 bytes"},
		{"seconds only", "(`key` VARBINARY(1024) PRIMARY KEY, fingerprint VARBINARY(1024) NOT NULL, token VARBINARY(128) NOT NULL, status TINYINT NOT NULL, response LONGBLOB, expires_at DATETIME NOT NULL)", "fractional digits"},
		{"no response", "(`key` VARBINARY(1024) PRIMARY KEY, fingerprint VARBINARY(1024) NOT NULL, token VARBINARY(128) NOT NULL, status TINYINT NOT NULL, expires_at DATETIME(6) NOT NULL)", `no column "response"`},
		{"wider primary key", "(`key` VARBINARY(1024), fingerprint VARBINARY(1024) NOT NULL, token VARBINARY(128) NOT NULL, status TINYINT NOT NULL, response LONGBLOB, expires_at DATETIME(6) NOT NULL, PRIMARY KEY (`key`, token))", "primary key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := uniqueName("idemkit_my_shape_")
			_, err := db.ExecContext(t.Context(), "CREATE TABLE "+quoteIdent(table)+" "+tc.ddl)
			require.NoError(t, err)
			s, err := New(db, WithTable(table))
			require.NoError(t, err)
			dropOnCleanup(t, s)
			err = s.Migrate(t.Context())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "mysql: migrate: ")
		})
	}
}

// TestLockWaitTimeoutStopsTheTransaction: a Claim in a transaction that
// times out waiting for another transaction's row lock (1205, here after
// 1s) fails, the Store refuses further calls in that transaction, and InTx
// does not commit it even when fn goes on.
func TestLockWaitTimeoutStopsTheTransaction(t *testing.T) {
	db := openDB(t, 4, func(c *dsnConfig) { c.Params["innodb_lock_wait_timeout"] = "1" })
	s := newTestStore(t, db)
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
			if _, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); err != nil {
				return err
			}
			close(holding)
			<-release
			return errRollback
		})
	}()
	<-holding
	err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
		_, err := st.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		assert.True(t, serverErr(err, errLockWaitTimeout), "Claim: %v, want the lock wait timeout", err)
		_, err = st.Claim(ctx, "other", "fp", store.NewToken(), time.Minute)
		assert.ErrorContains(t, err, "rolled the transaction back")
		return nil // as if fn ignored the errors
	})
	assert.ErrorContains(t, err, "mysql: commit: the server rolled the transaction back")
	close(release)
	require.ErrorIs(t, <-held, errRollback)
	_, err = s.Get(t.Context(), "other")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing of the timed-out transaction was committed")
}
