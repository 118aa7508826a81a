package spanner

import (
	"context"
	"errors"
	"fmt"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
)

type txKey struct{}

// txValue is what InTx puts in the context it passes to fn: the
// transaction and the Store that began it, so that only that Store joins
// it.
type txValue struct {
	owner *owner
	tx    *sp.ReadWriteTransaction
}

// TxFrom returns the read-write transaction InTx carries in ctx, for the
// caller's own reads and writes (Query, Read, Update, BufferWrite), and
// false when ctx carries none.
func TxFrom(ctx context.Context) (*sp.ReadWriteTransaction, bool) {
	v, ok := ctx.Value(txKey{}).(txValue)
	return v.tx, ok
}

// ownTx returns the transaction ctx carries when this Store's InTx began it.
func (s *Store) ownTx(ctx context.Context) (*sp.ReadWriteTransaction, bool) {
	v, ok := ctx.Value(txKey{}).(txValue)
	if !ok || v.owner != s.owner {
		return nil, false
	}
	return v.tx, true
}

// InTx implements store.Transactor on a Spanner read-write transaction:
// fn's Claim, its own writes through TxFrom(ctx) and its Complete commit
// together, or not at all.
//
// fn may be called more than once. Spanner aborts a read-write transaction
// when it conflicts with another (wound-wait locking; the emulator aborts
// every transaction that overlaps another one on the same database), and
// then nothing the attempt wrote stays: InTx calls fn again in a new
// transaction, with the client's backoff, until it commits, fn returns
// another error, or ctx ends — as spanner.Client.ReadWriteTransaction
// does. So fn must be safe to run again: its effects go through the
// transaction (they are discarded with an aborted attempt), and it keeps
// no state between calls. An effect outside the database (an email, a
// call to a payment provider) does not belong in InTx: use lease mode, the
// plain Store methods, where each call retries only its own transaction.
//
// When fn returns an error (other than an abort of the transaction) or
// panics, the transaction rolls back and fn's error is returned as is, or
// the panic re-raised. The Store passed to fn is this Store: its methods
// find the transaction in ctx and run in it, writing with DML so that a
// Complete sees the Claim before it. Another Store called with ctx runs
// outside this transaction. Spanner has no nested transactions: an InTx
// inside fn is an error.
//
// A concurrent InTx (or Claim) of the same key waits, by Spanner's locks or
// by the retries of its aborted attempts, until this transaction ends, and
// then sees its outcome: Completed after a commit, the key absent after a
// rollback.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spanner: begin: %w", err)
	}
	if _, ok := TxFrom(ctx); ok {
		return fmt.Errorf("spanner: begin: %w: InTx within InTx (Spanner has no nested transactions)", store.ErrInvalid)
	}
	leave, err := s.enter(ctx)
	if err != nil {
		return fmt.Errorf("spanner: begin: %w", err)
	}
	defer leave()
	outer := ctx
	var fnErr error // fn's own error in the last attempt, returned as is
	err = retryTx(ctx, func() error {
		_, err := s.client.ReadWriteTransactionWithOptions(ctx, func(_ context.Context, tx *sp.ReadWriteTransaction) (err error) {
			fnErr = nil
			defer func() {
				if p := recover(); p != nil {
					err = &errPanic{value: p}
				}
			}()
			// fn's context comes from InTx's, not from the client's: the
			// client marks its own as in a transaction and refuses to
			// begin another from it, which another Store (on another
			// database) called with fn's context must be free to do.
			fnErr = fn(context.WithValue(outer, txKey{}, txValue{owner: s.owner, tx: tx}), s)
			return fnErr
		}, sp.TransactionOptions{})
		return err
	})
	var pe *errPanic
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		panic(pe.value)
	case fnErr != nil && errors.Is(err, fnErr):
		return fnErr
	}
	return wrap(ctx, "commit", err)
}
