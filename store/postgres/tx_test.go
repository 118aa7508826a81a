package postgres

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// payments is the seeds' exercise: POST /payments with an Idempotency-Key,
// run in transactional mode so key, payment and stored response commit
// together.
type payments struct {
	t     *testing.T
	s     *Store
	pool  *pgxpool.Pool
	table string
}

func newPayments(t *testing.T, pool *pgxpool.Pool) *payments {
	t.Helper()
	p := &payments{t: t, s: newTestStore(t, pool), pool: pool, table: quote(uniqueName("idemkit_pg_payments_"))}
	_, err := pool.Exec(context.Background(),
		"CREATE TABLE "+p.table+" (id bigserial PRIMARY KEY, user_id bigint NOT NULL, amount int NOT NULL)")
	require.NoError(t, err)
	dropOnCleanup(t, "TABLE", p.table)
	return p
}

type payResult struct {
	id       int64
	outcome  store.Outcome
	replayed bool
}

// pay is the handler: claim the key, insert the payment through the
// transaction, store its id as the response. during, when set, runs after
// the payment's INSERT and before Complete; its error aborts the request.
func (p *payments) pay(ctx context.Context, key string, amount int, during func(ctx context.Context, tx pgx.Tx) error) (payResult, error) {
	var res payResult
	fp := "POST /payments amount=" + strconv.Itoa(amount)
	err := p.s.InTx(ctx, func(ctx context.Context, s store.Store) error {
		res = payResult{}
		tok := store.NewToken()
		c, err := s.Claim(ctx, key, fp, tok, time.Minute)
		if err != nil {
			return err
		}
		res.outcome = c.Outcome
		switch c.Outcome {
		case store.Completed:
			res.replayed = true
			res.id, err = strconv.ParseInt(string(c.Record.Response), 10, 64)
			return err
		case store.Acquired:
		default:
			return nil // Mismatch (422) or InProgress (409): nothing to do
		}
		tx, ok := TxFrom(ctx)
		if !ok {
			return errors.New("no transaction in ctx")
		}
		if err := tx.QueryRow(ctx, "INSERT INTO "+p.table+" (user_id, amount) VALUES (1, $1) RETURNING id", amount).Scan(&res.id); err != nil {
			return err
		}
		if during != nil {
			if err := during(ctx, tx); err != nil {
				return err
			}
		}
		return s.Complete(ctx, key, tok, []byte(strconv.FormatInt(res.id, 10)), 24*time.Hour)
	})
	return res, err
}

func (p *payments) count() int {
	p.t.Helper()
	var n int
	require.NoError(p.t, p.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+p.table).Scan(&n))
	return n
}

// requireFree checks that key is absent and a new claim acquires it.
func (p *payments) requireFree(key string) {
	p.t.Helper()
	_, err := p.s.Get(context.Background(), key)
	require.ErrorIs(p.t, err, store.ErrNotFound)
	res, err := p.pay(context.Background(), key, 1990, nil)
	require.NoError(p.t, err)
	require.Equal(p.t, store.Acquired, res.outcome, "the key is free again")
}

func TestPaymentsTenParallelCallsOnePayment(t *testing.T) {
	p := newPayments(t, testPool(t))
	const calls = 10
	start := make(chan struct{})
	results := make([]payResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = p.pay(context.Background(), "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", 1990, nil)
		}()
	}
	close(start)
	wg.Wait()
	first := 0
	for i := range calls {
		require.NoError(t, errs[i])
		require.Contains(t, []store.Outcome{store.Acquired, store.Completed}, results[i].outcome)
		require.Equal(t, results[0].id, results[i].id, "every call sees the same payment")
		require.NotZero(t, results[i].id)
		if !results[i].replayed {
			first++
		}
	}
	require.Equal(t, 1, first, "one real call, nine replays")
	require.Equal(t, 1, p.count(), "one payment")

	// Same key, another body: a mismatch (422), still one payment.
	res, err := p.pay(context.Background(), "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", 9999, nil)
	require.NoError(t, err)
	require.Equal(t, store.Mismatch, res.outcome)
	require.Equal(t, 1, p.count())
}

func TestPaymentsErrorInsideRollsBack(t *testing.T) {
	p := newPayments(t, testPool(t))
	boom := errors.New("card declined")
	_, err := p.pay(context.Background(), "k", 1990, func(context.Context, pgx.Tx) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Zero(t, p.count(), "no payment")
	p.requireFree("k")
	require.Equal(t, 1, p.count())
}

func TestPaymentsCancelledInsideRollsBack(t *testing.T) {
	p := newPayments(t, testPool(t))
	ctx, cancel := context.WithCancel(context.Background())
	_, err := p.pay(ctx, "k", 1990, func(context.Context, pgx.Tx) error { cancel(); return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, p.count(), "no payment")
	p.requireFree("k")
}

func TestPaymentsPanicInsideRollsBack(t *testing.T) {
	p := newPayments(t, testPool(t))
	require.PanicsWithValue(t, "handler bug", func() {
		_, _ = p.pay(context.Background(), "k", 1990, func(context.Context, pgx.Tx) error { panic("handler bug") })
	})
	require.Zero(t, p.count(), "no payment")
	p.requireFree("k")
}

// TestPaymentsConnectionKilled: the transaction's backend is terminated from
// another connection mid-transaction: the call fails with the driver's
// error, nothing is half-written, and the key is free.
func TestPaymentsConnectionKilled(t *testing.T) {
	pool := testPool(t)
	p := newPayments(t, pool)
	_, err := p.pay(context.Background(), "k", 1990, func(ctx context.Context, tx pgx.Tx) error {
		var pid int32
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return err
		}
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			return errors.Join(errors.New("pg_terminate_backend failed"), err)
		}
		return nil // the store's Complete now runs on a dead connection
	})
	require.Error(t, err)
	for _, sentinel := range []error{store.ErrLeaseLost, store.ErrNotFound, store.ErrInvalid} {
		require.NotErrorIs(t, err, sentinel)
	}
	require.Contains(t, err.Error(), "postgres: complete:")
	require.Zero(t, p.count(), "nothing half-written")
	p.requireFree("k")
}

// waitForLockWaiters polls pg_stat_activity until n backends running a
// statement on table wait for a lock (the duplicates blocked behind the first).
func waitForLockWaiters(t *testing.T, pool *pgxpool.Pool, table string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0",
			table).Scan(&waiting))
		if waiting >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "no duplicate blocked on the key's row")
		time.Sleep(5 * time.Millisecond) // polling the server's lock table, not waiting for a goroutine
	}
}

// TestTxDuplicateBlocksThenSees: a duplicate InTx blocks on the key's row
// while the first runs; after a commit it replays, after a rollback it
// acquires the key itself.
func TestTxDuplicateBlocksThenSees(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		want   store.Outcome
	}{
		{"commit then replay", true, store.Completed},
		{"rollback then acquire", false, store.Acquired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testPool(t)
			s := newTestStore(t, pool)
			holding, finish := make(chan struct{}), make(chan struct{})
			firstDone := make(chan error, 1)
			go func() {
				firstDone <- s.InTx(context.Background(), func(ctx context.Context, ts store.Store) error {
					tok := store.NewToken()
					if _, err := ts.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
						return err
					}
					close(holding)
					<-finish
					if !tc.commit {
						return errors.New("rolled back")
					}
					return ts.Complete(ctx, "k", tok, []byte("first"), time.Hour)
				})
			}()
			<-holding
			second := make(chan store.Claim, 1)
			secondErr := make(chan error, 1)
			go func() {
				secondErr <- s.InTx(context.Background(), func(ctx context.Context, ts store.Store) error {
					c, err := ts.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
					second <- c
					return err
				})
			}()
			waitForLockWaiters(t, pool, s.Table(), 1)
			select {
			case <-second:
				t.Fatal("the duplicate did not wait for the first transaction")
			default:
			}
			close(finish)
			err := <-firstDone
			if tc.commit {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, "rolled back")
			}
			c := <-second
			require.NoError(t, <-secondErr)
			require.Equal(t, tc.want, c.Outcome)
			if tc.commit {
				require.Equal(t, []byte("first"), c.Record.Response)
			}
		})
	}
}

// TestTxStoreCallsJoinTransaction: the root Store called with InTx's
// context runs inside the transaction (no deadlock on its own row), and
// nested InTx runs in a savepoint.
func TestTxStoreCallsJoinTransaction(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx := context.Background()
	err := s.InTx(ctx, func(ctx context.Context, ts store.Store) error {
		tok := store.NewToken()
		if _, err := ts.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
			return err
		}
		rec, err := s.Get(ctx, "k") // root store, same transaction: sees the uncommitted row
		if err != nil {
			return err
		}
		assert.Equal(t, tok, rec.Token)
		inner := s.InTx(ctx, func(ctx context.Context, ns store.Store) error {
			_, err := ns.Claim(ctx, "nested", "fp", store.NewToken(), time.Minute)
			if err != nil {
				return err
			}
			return errors.New("undo the savepoint")
		})
		assert.EqualError(t, inner, "undo the savepoint")
		_, err = s.Get(ctx, "nested")
		assert.ErrorIs(t, err, store.ErrNotFound, "the savepoint rolled back")
		return s.Complete(ctx, "k", tok, []byte("r"), time.Hour)
	})
	require.NoError(t, err)
	rec, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
}

// TestTxOnStrictCallerTransaction: a Store built on a caller's REPEATABLE
// READ transaction fails a conflicting claim with an error, never loops.
func TestTxOnStrictCallerTransaction(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx := context.Background()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var one int
	require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one)) // take the snapshot now
	_, err = s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err) // committed after tx's snapshot
	ts, err := New(tx, WithTable(s.opts.table))
	require.NoError(t, err)
	_, err = ts.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.Error(t, err)
	require.Contains(t, err.Error(), "postgres: claim:")
	require.NotErrorIs(t, err, store.ErrInvalid)
}

// TestTxSwallowedErrorDoesNotCommit: when a statement fails inside fn and fn
// ignores it and returns nil, the server has aborted the transaction; InTx
// reports that the commit rolled back instead of claiming success, and the
// key is left free.
func TestTxSwallowedErrorDoesNotCommit(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	ctx := context.Background()
	err := s.InTx(ctx, func(ctx context.Context, ts store.Store) error {
		tok := store.NewToken()
		if _, err := ts.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
			return err
		}
		tx, _ := TxFrom(ctx)
		_, _ = tx.Exec(ctx, "SELECT 1/0") // fails; the caller forgets to check
		_ = ts.Complete(ctx, "k", tok, []byte("r"), time.Hour)
		return nil
	})
	require.Error(t, err)
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
	require.Contains(t, err.Error(), "postgres: commit:")
	_, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
}
