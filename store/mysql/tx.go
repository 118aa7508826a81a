package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/sqltx"
	"github.com/idemkit/idemkit/store"
)

// maxTxAttempts bounds how often InTx runs a transaction that the server
// rolled back to break a deadlock.
const maxTxAttempts = 10

type ctxKey struct{}

// txState is what InTx puts in the context it passes to fn: the Store that
// began the transaction (only that Store joins it) and the transaction.
type txState struct {
	root *Store
	tx   *sql.Tx

	mu      sync.Mutex
	aborted error // the deadlock (or lock wait timeout) that rolled the transaction back
}

func (st *txState) abort(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.aborted == nil {
		st.aborted = err
	}
}

func (st *txState) abortedBy() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.aborted
}

func stateFrom(ctx context.Context) *txState {
	st, _ := ctx.Value(ctxKey{}).(*txState)
	return st
}

// TxFrom returns the transaction of the InTx call whose fn received ctx (or
// a context derived from it), for the caller's own statements: a payment row
// inserted with TxFrom(ctx) commits or rolls back with the key. It returns
// false when ctx carries none.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	if st := stateFrom(ctx); st != nil {
		return st.tx, true
	}
	return nil, false
}

// InTx implements store.Transactor. It begins a transaction on the Store's
// *sql.DB (at the session's isolation level: REPEATABLE READ and READ
// COMMITTED both work), calls fn with a context that carries it (TxFrom)
// and a Store bound to it, and commits when fn returns nil. When fn returns
// an error, panics, or ctx ends, the transaction rolls back: no effect of fn
// stays and the key is as before, so a retry runs the work again. fn's error
// is returned as is; a panic is re-raised after the rollback.
//
// Inside fn, claim the key first, then do the work through TxFrom(ctx), then
// Complete: a concurrent InTx claiming the same key waits on the key's row
// lock until this transaction ends, then replays it (Completed) after a
// commit or acquires the key after a rollback. A replay writes nothing.
//
// Deadlocks: when several transactions wait for one key and its holder rolls
// back, InnoDB may resolve their race by rolling one of them back whole
// (error 1213). InTx then runs fn again in a new transaction, up to 10 times
// with a short random pause: the server has undone every write of the failed
// attempt, so fn must keep its effects in the database (the point of
// transactional mode) and return the errors of its statements. IsDeadlock
// tells such an error apart when all attempts fail. A lock wait timeout
// (1205) is returned, not retried; after it (as after a deadlock) the Store
// refuses further calls in the transaction, and InTx does not commit it.
//
// The Store's own methods called with ctx (or a context derived from it)
// also run in the transaction; InTx called with such a context runs fn in a
// SAVEPOINT of it (an error rolls back to the savepoint, nil keeps its writes
// for the outer commit). Contexts carrying another Store's transaction are
// ignored. A transaction is not safe for concurrent use: fn must not call the
// Store from several goroutines.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	if fn == nil {
		return fmt.Errorf("mysql: begin: %w: nil fn", store.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mysql: begin: %w", err)
	}
	if st := stateFrom(ctx); st != nil && st.root == s {
		return st.savepoint(ctx, fn)
	}
	for attempt := 1; ; attempt++ {
		err := s.inTxOnce(ctx, fn)
		if err == nil || !IsDeadlock(err) || attempt == maxTxAttempts || ctx.Err() != nil {
			return err
		}
		s.stats.txRetries.Add(1)
		t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond))))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (s *Store) inTxOnce(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	var st *txState
	return sqltx.Run(ctx, s.db, "mysql", sqltx.Hooks{
		Verify: func() error {
			if dl := st.abortedBy(); dl != nil {
				// fn went on after a deadlock (or a lock wait timeout): its
				// later statements may have run outside the transaction.
				// Report that rather than commit.
				return fmt.Errorf("mysql: commit: the server rolled the transaction back: %w", dl)
			}
			return nil
		},
		QuietRollback: IsDeadlock, // the server rolled it back already
	}, func(tx *sql.Tx) error {
		st = &txState{root: s, tx: tx}
		return fn(context.WithValue(ctx, ctxKey{}, st), txStore{runner{s: s, st: st}})
	})
}

// savepoint runs fn inside a SAVEPOINT of the transaction st.
func (st *txState) savepoint(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	if err := st.abortedBy(); err != nil {
		return fmt.Errorf("mysql: savepoint: the server rolled the transaction back: %w", err)
	}
	// After a deadlock the whole transaction is gone, and the savepoint
	// with it: nothing to roll back to.
	gone := func() bool { return st.abortedBy() != nil }
	return sqltx.Savepoint(ctx, st.tx, "mysql", gone, func() error {
		return fn(ctx, txStore{runner{s: st.root, st: st}})
	})
}

// txStore is the store.Store InTx passes to fn: every call runs in the
// transaction, whatever context it is given.
type txStore struct{ r runner }

func (t txStore) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	return t.r.claim(ctx, key, fingerprint, token, lease)
}

func (t txStore) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	return t.r.complete(ctx, key, token, response, retention)
}

func (t txStore) Release(ctx context.Context, key string, token store.Token) error {
	return t.r.release(ctx, key, token)
}

func (t txStore) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return t.r.renew(ctx, key, token, lease)
}

func (t txStore) Get(ctx context.Context, key string) (store.Record, error) {
	return t.r.get(ctx, key)
}
