// Package sqltx is the transaction skeleton that the database/sql backends
// (store/sqlite, store/mysql) share for their InTx: begin, run the caller's
// function, commit on nil and roll back on an error, a panic or
// runtime.Goexit, and nested calls as SAVEPOINTs. Each backend keeps what is
// its own (its write lock, its deadlock retries, what it puts in the
// context). It imports the standard library only.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
)

// Hooks are a backend's additions to Run; each may be nil.
type Hooks struct {
	// Start runs first in the new transaction (SQLite takes its write
	// lock there); its error rolls back and Run returns "pkg: begin: err".
	Start func(tx *sql.Tx) error
	// Verify runs when fn returned nil, before the commit; its error rolls
	// back instead of committing and is returned as it is.
	Verify func() error
	// QuietRollback reports that a failed rollback after err is expected
	// (the server already rolled the transaction back) and is not joined to
	// err.
	QuietRollback func(err error) bool
}

// Run begins a transaction on db, calls fn with it, and commits when fn
// returns nil (and Verify agrees). When fn returns an error, panics, or
// ctx ends, the transaction rolls back: fn's error is returned as it is
// (joined with a failed rollback's), and a panic goes on after the
// rollback. pkg names the backend in errors ("sqlite: commit: ...").
func Run(ctx context.Context, db *sql.DB, pkg string, h Hooks, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", pkg, err)
	}
	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			_ = tx.Rollback()
		}
	}()
	if h.Start != nil {
		if err := h.Start(tx); err != nil {
			done = true
			_ = tx.Rollback()
			return fmt.Errorf("%s: begin: %w", pkg, err)
		}
	}
	err = fn(tx)
	if err == nil && h.Verify != nil {
		err = h.Verify()
	}
	if err != nil {
		done = true
		rbErr := tx.Rollback()
		if rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && (h.QuietRollback == nil || !h.QuietRollback(err)) {
			return errors.Join(err, fmt.Errorf("%s: rollback: %w", pkg, rbErr))
		}
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// database/sql rolled the transaction back when ctx ended.
			return fmt.Errorf("%s: commit: %w", pkg, errors.Join(ctxErr, err))
		}
		return fmt.Errorf("%s: commit: %w", pkg, err)
	}
	return nil
}

// savepoints numbers the SAVEPOINTs of nested calls, process-wide.
var savepoints atomic.Uint64

// Savepoint runs fn inside a SAVEPOINT of tx: when fn returns an error or
// panics, the transaction rolls back to the savepoint (what fn wrote is
// undone, what came before stays) and fn's error is returned; when it
// returns nil the savepoint is released and fn's writes wait for the outer
// commit. gone (may be nil) reports that the server already rolled the
// whole transaction back, savepoint included, so there is nothing to undo.
func Savepoint(ctx context.Context, tx *sql.Tx, pkg string, gone func() bool, fn func() error) error {
	name := "idemkit_" + strconv.FormatUint(savepoints.Add(1), 10)
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("%s: savepoint: %w", pkg, err)
	}
	undo := func() error {
		if gone != nil && gone() {
			return nil
		}
		// ROLLBACK TO keeps the savepoint; RELEASE ends it.
		bg := context.WithoutCancel(ctx)
		if _, err := tx.ExecContext(bg, "ROLLBACK TO SAVEPOINT "+name); err != nil {
			return err
		}
		_, err := tx.ExecContext(bg, "RELEASE SAVEPOINT "+name)
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = undo()
		}
	}()
	if err := fn(); err != nil {
		done = true
		if rbErr := undo(); rbErr != nil {
			return errors.Join(err, fmt.Errorf("%s: rollback to savepoint: %w", pkg, rbErr))
		}
		return err
	}
	done = true
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("%s: release savepoint: %w", pkg, err)
	}
	return nil
}
