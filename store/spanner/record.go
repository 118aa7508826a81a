package spanner

import (
	"context"
	"fmt"
	"time"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
)

// row is one record as the table holds it.
type row struct {
	Fingerprint string
	Token       string
	Status      int64
	Response    []byte
	LockedUntil sp.NullTime
	ExpiresAt   time.Time
	Attempt     int64 // NULL (a row written before the column) reads as 0
	Fence       int64
}

// record returns r as the store.Record of key.
func (r *row) record(key string) store.Record {
	rec := store.Record{
		Key:         key,
		Fingerprint: r.Fingerprint,
		Token:       store.Token(r.Token),
		ExpiresAt:   r.ExpiresAt,
		Attempt:     uint32(r.Attempt),
		Fence:       uint64(r.Fence),
	}
	if r.Status == statusCompleted {
		rec.Status = store.StatusCompleted
		rec.Response = r.Response
		if rec.Response == nil {
			rec.Response = []byte{}
		}
	} else {
		rec.Status = store.StatusInProgress
		rec.LockedUntil = r.LockedUntil.Time
	}
	return rec
}

// querier runs a statement: a single-use read-only transaction for Get, or
// a read-write transaction.
type querier interface {
	Query(ctx context.Context, stmt sp.Statement) *sp.RowIterator
}

// read returns the server's time and the row stored for key (nil when
// there is none), live or not: over from the instant the server's time
// reaches its ExpiresAt (see liveRow).
func (s *Store) read(ctx context.Context, q querier, key string) (now time.Time, stored *row, err error) {
	it := q.Query(ctx, sp.Statement{SQL: s.q.read, Params: map[string]any{"Key": key}})
	defer it.Stop()
	r, err := it.Next()
	if err != nil {
		return time.Time{}, nil, err
	}
	var (
		fp, tok        sp.NullString
		status         sp.NullInt64
		expires        sp.NullTime
		attempt, fence sp.NullInt64
		rec            row
	)
	if err := r.Columns(&now, &fp, &tok, &status, &rec.Response, &rec.LockedUntil, &expires, &attempt, &fence); err != nil {
		return time.Time{}, nil, err
	}
	if s.afterRead != nil {
		if err := s.afterRead(ctx); err != nil {
			return time.Time{}, nil, err
		}
	}
	if !fp.Valid {
		return now, nil, nil
	}
	rec.Fingerprint, rec.Token, rec.Status, rec.ExpiresAt = fp.StringVal, tok.StringVal, status.Int64, expires.Time
	rec.Attempt, rec.Fence = attempt.Int64, fence.Int64
	return now, &rec, nil
}

// liveRow returns r when it is a live record at now, and nil when there is
// none or it is over (a lapsed lease, an ended retention: absent).
func liveRow(r *row, now time.Time) *row {
	if r == nil || !r.ExpiresAt.After(now) {
		return nil
	}
	return r
}

// txn is the read-write transaction an operation runs in. In lease mode its
// writes are mutations, sent with the commit; in InTx they are DML, which
// later reads of the same transaction see (Spanner's buffered mutations are
// invisible to them).
type txn struct {
	tx  *sp.ReadWriteTransaction
	dml bool
}

// put writes r as key's row, inserting it or replacing the row that exists.
func (s *Store) put(ctx context.Context, t txn, key string, exists bool, r row) error {
	var resp []byte
	if r.Status == statusCompleted {
		resp = r.Response
		if resp == nil {
			resp = []byte{} // NULL is for a record in progress
		}
	}
	if !t.dml {
		return t.tx.BufferWrite([]*sp.Mutation{sp.InsertOrUpdate(s.table, columns,
			[]any{key, r.Fingerprint, r.Token, r.Status, resp, r.LockedUntil, r.ExpiresAt, r.Attempt, r.Fence})})
	}
	sql := s.q.insert
	if exists {
		sql = s.q.update
	}
	n, err := t.tx.Update(ctx, sp.Statement{SQL: sql, Params: map[string]any{
		"Key": key, "Fingerprint": r.Fingerprint, "Token": r.Token, "Status": r.Status,
		"Response": resp, "LockedUntil": r.LockedUntil, "ExpiresAt": r.ExpiresAt,
		"Attempt": r.Attempt, "Fence": r.Fence,
	}})
	if err == nil && n != 1 {
		err = fmt.Errorf("wrote %d rows for one key", n)
	}
	return err
}

// remove deletes key's row.
func (s *Store) remove(ctx context.Context, t txn, key string) error {
	if !t.dml {
		return t.tx.BufferWrite([]*sp.Mutation{sp.Delete(s.table, sp.Key{key})})
	}
	_, err := t.tx.Update(ctx, sp.Statement{SQL: s.q.delete, Params: map[string]any{"Key": key}})
	return err
}

// errPanic carries a panic of InTx's fn out of the client's transaction
// function, so the client rolls back before InTx re-raises it.
type errPanic struct{ value any }

func (e *errPanic) Error() string { return fmt.Sprint("spanner: panic in InTx: ", e.value) }

// transact runs f in a read-write transaction: the one InTx carries in ctx
// when this Store began it, or else a new one, retried while Spanner aborts
// it or drops it (see retryTx), until it commits or ctx ends. f must start
// from scratch on every call.
func (s *Store) transact(ctx context.Context, op string, f func(ctx context.Context, t txn) error) error {
	if tx, ok := s.ownTx(ctx); ok {
		if err := f(ctx, txn{tx: tx, dml: true}); err != nil {
			return wrap(ctx, op, err)
		}
		return nil
	}
	leave, err := s.enter(ctx)
	if err != nil {
		return wrap(ctx, op, err)
	}
	defer leave()
	err = retryTx(ctx, func() error {
		_, err := s.client.ReadWriteTransactionWithOptions(ctx, func(ctx context.Context, tx *sp.ReadWriteTransaction) error {
			return f(ctx, txn{tx: tx})
		}, sp.TransactionOptions{})
		return err
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}
