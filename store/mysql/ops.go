package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// runner runs the Store's statements on its *sql.DB (st nil: each statement
// autocommits) or in one of its transactions.
type runner struct {
	s  *Store
	st *txState
}

// runner returns the runner for ctx: in the transaction ctx carries when it
// is one of this Store's, on the Store's *sql.DB otherwise.
func (s *Store) runner(ctx context.Context) runner {
	if st := stateFrom(ctx); st != nil && st.root == s {
		return runner{s: s, st: st}
	}
	return runner{s: s}
}

func (r runner) stmt(ctx context.Context, id stmtID) (*sql.Stmt, error) {
	var (
		st  *sql.Stmt
		err error
	)
	if r.st != nil {
		st, err = r.s.stmts.inTx(ctx, r.s.db, r.st.tx, id)
	} else {
		st, err = r.s.stmts.get(ctx, r.s.db, id)
	}
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return st, nil
}

func (r runner) exec(ctx context.Context, id stmtID, args ...any) (sql.Result, error) {
	st, err := r.stmt(ctx, id)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// rowScanner is *sql.Row, or a failed preparation.
type rowScanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

func (r runner) queryRow(ctx context.Context, id stmtID, args ...any) rowScanner {
	st, err := r.stmt(ctx, id)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// usable fails when ctx is done or when the transaction was rolled back by
// a deadlock: its statements would run outside any transaction.
func (r runner) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.st != nil {
		if err := r.st.abortedBy(); err != nil {
			return fmt.Errorf("the server rolled the transaction back: %w", err)
		}
	}
	return nil
}

// retryable reports whether err is a deadlock that the caller may retry by
// running the statement again: in autocommit only, where the server rolled
// back just that statement. In a transaction the server rolled back
// everything, so the transaction is marked and the error returned. A lock
// wait timeout (1205) in a transaction marks it too: with the server option
// innodb_rollback_on_timeout it rolled the whole transaction back, and the
// Store cannot tell.
func (r runner) retryable(err error) bool {
	if err == nil {
		return false
	}
	if r.st != nil {
		if IsDeadlock(err) || serverErr(err, errLockWaitTimeout) {
			r.st.abort(err)
		}
		return false
	}
	if !IsDeadlock(err) {
		return false
	}
	r.s.stats.deadlocks.Add(1)
	return true
}

// maxDeadlockRetries bounds how often an autocommit statement is run again
// after the server chose it as a deadlock victim.
const maxDeadlockRetries = 16

// execRetry is exec, run again after a deadlock in autocommit.
func (r runner) execRetry(ctx context.Context, id stmtID, args ...any) (sql.Result, error) {
	for i := 0; ; i++ {
		res, err := r.exec(ctx, id, args...)
		if i < maxDeadlockRetries && r.retryable(err) {
			continue
		}
		if err != nil && r.st != nil {
			r.retryable(err) // marks the transaction aborted on a deadlock
		}
		return res, err
	}
}

// scanRetry is queryRow and Scan, run again after a deadlock in autocommit.
func (r runner) scanRetry(ctx context.Context, id stmtID, args []any, dest ...any) error {
	for i := 0; ; i++ {
		err := r.queryRow(ctx, id, args...).Scan(dest...)
		if i < maxDeadlockRetries && r.retryable(err) {
			continue
		}
		if err != nil && r.st != nil {
			r.retryable(err)
		}
		return err
	}
}

// Complete implements store.Store with one token-checked UPDATE: it stores
// response when token holds a live lease on key. When token already
// completed the key it returns nil and changes nothing: the first response
// and retention stay, since a client may have seen them. Otherwise it
// returns ErrLeaseLost (the lease lapsed, or another token holds or
// completed the key). When the UPDATE changes no row, a SELECT tells a
// retried Complete from a lost lease, whatever clientFoundRows says.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	return s.runner(ctx).complete(ctx, key, token, response, retention)
}

func (r runner) complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("mysql: complete: %w", err)
	}
	if err := r.usable(ctx); err != nil {
		return fmt.Errorf("mysql: complete: %w", err)
	}
	if response == nil {
		response = []byte{} // '' rather than NULL: a completed record always has a response
	}
	for range maxCompleteAttempts {
		res, err := r.execRetry(ctx, stmtComplete, response, micros(retention), key, string(token))
		if err != nil {
			return fmt.Errorf("mysql: complete: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("mysql: complete: %w", err)
		}
		if n > 0 {
			return nil
		}
		status, err := r.heldStatus(ctx, key, token)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("mysql: complete: %w", store.ErrLeaseLost)
		case err != nil:
			return fmt.Errorf("mysql: complete: %w", err)
		case status == statusCompleted:
			return nil // a retried Complete: the first response stays
		}
		// In progress by token now, though the UPDATE found it otherwise:
		// a claim of the token's (a retry racing this call) took the key
		// in between. Complete it now.
	}
	return fmt.Errorf("mysql: complete: the key changed under %d attempts in a row; try again", maxCompleteAttempts)
}

// maxCompleteAttempts bounds Complete's UPDATEs when each finds the key
// changing under it.
const maxCompleteAttempts = 3

// Release implements store.Store with one DELETE of the live record in
// progress held by token; any other record is left alone, a lapsed lease of
// token's own too (it stays for store.LapsedKept, so that the claim that
// takes it over counts the attempt).
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	return s.runner(ctx).release(ctx, key, token)
}

func (r runner) release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("mysql: release: %w", err)
	}
	if err := r.usable(ctx); err != nil {
		return fmt.Errorf("mysql: release: %w", err)
	}
	if _, err := r.execRetry(ctx, stmtRelease, key, string(token)); err != nil {
		return fmt.Errorf("mysql: release: %w", err)
	}
	return nil
}

// Renew implements store.Store with one UPDATE of the live lease that
// token holds on key, to end lease from the server's now; the attempt and
// fence stay. When it changes no row, a SELECT tells a lost lease
// (ErrLeaseLost: the key is absent, released, lapsed, completed or another
// token's) from a lease that already ends at the very microsecond the
// renewal sets, which an UPDATE reports as no row changed unless the DSN
// sets clientFoundRows.
// It never creates a record or revives a lease that is over, so a renewal
// that arrives after a Release leaves the key free.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return s.runner(ctx).renew(ctx, key, token, lease)
}

// heldStatus reads the status of token's live record of key (locking it
// inside a transaction), for a write that changed no row: sql.ErrNoRows
// when token holds no live record.
func (r runner) heldStatus(ctx context.Context, key string, token store.Token) (int8, error) {
	held := stmtHeld
	if r.st != nil {
		held = stmtHeldLocking
	}
	var status int8
	err := r.scanRetry(ctx, held, []any{key, string(token)}, &status)
	return status, err
}

func (r runner) renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("mysql: renew: %w", err)
	}
	if err := r.usable(ctx); err != nil {
		return fmt.Errorf("mysql: renew: %w", err)
	}
	res, err := r.execRetry(ctx, stmtRenew, micros(lease), key, string(token))
	if err != nil {
		return fmt.Errorf("mysql: renew: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysql: renew: %w", err)
	}
	if n > 0 {
		return nil
	}
	status, err := r.heldStatus(ctx, key, token)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && status != statusInProgress:
		return fmt.Errorf("mysql: renew %q: %w", key, store.ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("mysql: renew: %w", err)
	}
	return nil
}

// Get implements store.Store: one SELECT of the live record, ErrNotFound when
// there is none. In a transaction it is a consistent (non-locking) read.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	return s.runner(ctx).get(ctx, key)
}

func (r runner) get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("mysql: get: %w", err)
	}
	if err := r.usable(ctx); err != nil {
		return store.Record{}, fmt.Errorf("mysql: get: %w", err)
	}
	var cur row
	err := r.scanRetry(ctx, stmtGet, []any{key},
		&cur.fingerprint, &cur.token, &cur.status, &cur.response, &cur.expiresUS, &cur.attempt, &cur.fence)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("mysql: get: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("mysql: get: %w", err)
	}
	return cur.record(key), nil
}

// Purge implements store.Purger: it deletes records whose retention is over
// and records in progress whose lease lapsed at least store.LapsedKept ago
// (a lapsed lease is kept that long for the attempt count of the claim that
// takes it over), in DELETE statements of at most
// the purge batch (WithPurgeBatch) rows each, oldest first through the index
// on expires_at (ORDER BY expires_at, key: deterministic, so safe for
// statement-based replication). It returns how many rows it deleted; when
// ctx is done it stops between batches with ctx's error, and what it deleted
// stays deleted. Call it from a periodic job. Each batch walks the index
// from the oldest deadline, past the lapsed leases it keeps (the last
// LapsedKept's worth), which are few unless many holders die.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	r := s.runner(ctx)
	var total int64
	for {
		if err := r.usable(ctx); err != nil {
			return total, fmt.Errorf("mysql: purge: %w", err)
		}
		res, err := r.execRetry(ctx, stmtPurge, s.opts.purgeBatch)
		if err != nil {
			return total, fmt.Errorf("mysql: purge: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("mysql: purge: %w", err)
		}
		total += n
		if n < int64(s.opts.purgeBatch) {
			return total, nil
		}
	}
}
