package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/internal/sqltx"
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
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
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
	var hooks sqltx.Hooks
	if !s.immediate {
		// Take the write lock now, before fn can read: a transaction that
		// reads and then writes could fail with SQLITE_BUSY instead of waiting.
		hooks.Start = func(tx *sql.Tx) error {
			_, err := runner{s: s, tx: tx}.write(ctx, stmtLock)
			return err
		}
	}
	return sqltx.Run(ctx, s.db, "sqlite", hooks, func(tx *sql.Tx) error {
		st := &txState{s: s, tx: tx}
		return fn(context.WithValue(ctx, ctxKey{}, st), txStore{runner{s: s, tx: tx}})
	})
}

// savepoint runs fn inside a SAVEPOINT of the transaction st.
func (st *txState) savepoint(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return sqltx.Savepoint(ctx, st.tx, "sqlite", nil, func() error {
		return fn(ctx, txStore{runner{s: st.s, tx: st.tx}})
	})
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

func (t txStore) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return t.r.renew(ctx, key, token, lease)
}

func (t txStore) Get(ctx context.Context, key string) (store.Record, error) {
	return t.r.get(ctx, key)
}
