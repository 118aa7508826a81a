package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/store"
)

type txKey struct{}

// txValue is what InTx puts in the context it passes to fn: the transaction
// and the Store that began it, so that only that Store (and the Stores bound
// to its transactions) joins it; a Store on another database or table never
// writes into it.
type txValue struct {
	owner *owner
	tx    pgx.Tx
}

// owner identifies a Store made by New; the Stores InTx binds to its
// transactions share their parent's.
type owner struct{ _ byte } // not zero-sized: every owner has its own address

// TxFrom returns the transaction InTx carries in ctx, for the caller's own
// statements, and false when ctx carries none.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	v, ok := ctx.Value(txKey{}).(txValue)
	return v.tx, ok
}

// ownTx returns the transaction ctx carries when this Store's InTx began it.
func (s *Store) ownTx(ctx context.Context) (pgx.Tx, bool) {
	v, ok := ctx.Value(txKey{}).(txValue)
	if !ok || v.owner != s.owner {
		return nil, false
	}
	return v.tx, true
}

// beginner is implemented by *pgxpool.Pool and *pgx.Conn, not by pgx.Tx.
type beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// InTx implements store.Transactor. It begins a transaction at READ
// COMMITTED, calls fn with a context that carries it (TxFrom) and a Store
// bound to it, and commits when fn returns nil. When fn returns an error,
// panics, or the connection dies, the transaction rolls back: no effect of fn
// stays and the key is as before, so a retry runs the work again. fn's error
// is returned as is; a panic is re-raised after the rollback.
//
// Inside fn, claim the key first, then do the work through TxFrom(ctx), then
// Complete: a concurrent InTx claiming the same key blocks on the key's row
// until this transaction ends, then replays it (Completed) after a commit or
// acquires the key after a rollback. A replay writes nothing, so a
// transaction that only replays commits without a disk flush.
//
// This Store's own methods called with ctx (or any context derived from it)
// also run in the transaction, so they never wait for a lock it holds. Only
// this Store joins it: another Store (made by another New call, on another
// database or table) called with ctx runs on its own DB as if ctx carried no
// transaction, so it never writes into a transaction of the wrong database.
// When ctx already carries a transaction of this Store (a nested InTx) or
// the Store was built on a pgx.Tx, InTx runs fn in a savepoint of it, at that
// transaction's isolation level; claims need READ COMMITTED. A transaction is not safe
// for concurrent use: fn must not call the Store from several goroutines.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	var tx pgx.Tx
	if b, ok := s.conn(ctx).(beginner); ok {
		tx, err = b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	} else {
		tx, err = s.conn(ctx).Begin(ctx)
	}
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback(context.WithoutCancel(ctx)) // the panic matters, not this error
		}
	}()
	bound := &Store{db: tx, opts: s.opts, table: s.table, sql: s.sql, stats: s.stats, owner: s.owner}
	if err := fn(context.WithValue(ctx, txKey{}, txValue{owner: s.owner, tx: tx}), bound); err != nil {
		done = true
		_ = tx.Rollback(context.WithoutCancel(ctx)) // fn's error says what went wrong
		return err
	}
	done = true
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}
