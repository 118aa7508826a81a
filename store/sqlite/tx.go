package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

type ctxKey struct{}

// txState is what InTx puts in the context it passes to fn.
type txState struct {
	s  *Store
	tx *sql.Tx
}

func stateFrom(ctx context.Context) *txState {
	st, _ := ctx.Value(ctxKey{}).(*txState)
	return st
}

// TxFrom returns the transaction of the InTx call whose fn received ctx (or a
// context derived from it), for the caller's own statements: the payment row
// inserted with TxFrom(ctx) commits or rolls back with the key.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	if st := stateFrom(ctx); st != nil {
		return st.tx, true
	}
	return nil, false
}

// savepoints numbers the SAVEPOINTs of nested InTx calls.
var savepoints atomic.Uint64

// InTx runs fn in one database transaction: fn receives a context that
// carries the transaction (see TxFrom) and a store.Store whose calls run in
// it, so Claim, the caller's own writes and Complete commit together. When fn
// returns nil the transaction commits; when fn returns an error, panics, or
// ctx ends, it rolls back (a panic is re-raised) and the key is as it was, so
// a retry runs the work again. fn's error is returned as it is.
//
// The transaction holds SQLite's write lock from its first statement, so a
// concurrent InTx for the same key (in this process or another) waits, for at
// most the busy timeout, until this one ends, and then sees its result:
// Completed after a commit, the key free after a rollback. Keep fn short: no
// other write of this database runs while it does.
//
// Inside fn, use the Store and context it receives; a call on this Store with
// that context also runs in the transaction. InTx called with such a context
// runs fn in a SAVEPOINT of the same transaction: fn's error rolls back to it,
// nil keeps its writes for the outer commit.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) (err error) {
	if fn == nil {
		return fmt.Errorf("sqlite: begin: %w: nil fn", store.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if st := stateFrom(ctx); st != nil && st.s == s {
		return st.savepoint(ctx, fn)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
		}
	}()
	r := runner{s: s, tx: tx}
	if !s.immediate {
		// Take the write lock now, before fn can read: a transaction that
		// reads and then writes could fail with SQLITE_BUSY instead of waiting.
		if _, err := r.write(ctx, stmtLock); err != nil {
			done = true
			_ = tx.Rollback()
			return fmt.Errorf("sqlite: begin: %w", err)
		}
	}
	st := &txState{s: s, tx: tx}
	if err := fn(context.WithValue(ctx, ctxKey{}, st), txStore{r}); err != nil {
		done = true
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("sqlite: rollback: %w", rbErr))
		}
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// database/sql rolled the transaction back when ctx ended.
			return fmt.Errorf("sqlite: commit: %w", errors.Join(ctxErr, err))
		}
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// savepoint runs fn inside a SAVEPOINT of the transaction st.
func (st *txState) savepoint(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	name := "idemkit_" + strconv.FormatUint(savepoints.Add(1), 10)
	if _, err := st.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("sqlite: savepoint: %w", err)
	}
	undo := func() error {
		// ROLLBACK TO keeps the savepoint open; RELEASE ends it.
		_, err := st.tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO "+name+"; RELEASE "+name)
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = undo()
		}
	}()
	if err := fn(ctx, txStore{runner{s: st.s, tx: st.tx}}); err != nil {
		done = true
		if rbErr := undo(); rbErr != nil {
			return errors.Join(err, fmt.Errorf("sqlite: rollback to savepoint: %w", rbErr))
		}
		return err
	}
	done = true
	if _, err := st.tx.ExecContext(ctx, "RELEASE "+name); err != nil {
		return fmt.Errorf("sqlite: release savepoint: %w", err)
	}
	return nil
}

// txStore is the store.Store InTx passes to fn: every call runs in the
// transaction.
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

func (t txStore) Get(ctx context.Context, key string) (store.Record, error) {
	return t.r.get(ctx, key)
}
