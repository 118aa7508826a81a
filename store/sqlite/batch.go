package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"
)

// Writes outside InTx go through a queue that groups concurrent ones into one
// transaction (group commit). A caller that finds the Store's gate open runs
// its statement at once, alone and in autocommit, exactly as raw database/sql
// would (with one goroutine that is every write). A caller that finds it
// taken enqueues its statement and then either takes the gate when it opens
// and becomes the leader, running everything queued so far, or waits until a
// leader has run its statement. A queue of many costs one BEGIN … COMMIT
// instead of one commit per statement, and the Store's writers never meet at
// SQLite's busy back-off.
//
// Grouping changes neither atomicity nor isolation: each statement is still
// one atomic statement, run in queue order, and each caller hears its result
// only after the transaction that holds it has committed. If one statement
// fails on its own account, the transaction rolls back, that statement's
// caller gets the error and the others run again, so one caller's failure
// never becomes another's; a failure every statement would share (BEGIN,
// COMMIT, the write lock busy past the timeout) is reported to all of them.

// A caller waits as long as the queue moves. It gives up with a
// LockTimeoutError only when no write has finished for the busy timeout: the
// gate is held by one long InTx, or by an InTx whose fn calls the Store with
// a context that does not carry the transaction, which would otherwise wait
// for itself forever.

// maxBatch bounds how many statements one transaction groups.
const maxBatch = 64

type writeReq struct {
	ctx  context.Context
	id   stmtID
	args []any
	dest []any // for a statement that returns a row: where to scan it
	n    int64 // rows affected (with dest: 1 for the row returned, 0 for none)
	err  error
	done chan struct{}
}

// writeQueue holds the statements waiting for a leader.
type writeQueue struct {
	mu   sync.Mutex
	reqs []*writeReq
}

// take removes and returns up to maxBatch queued statements.
func (q *writeQueue) take() []*writeReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.reqs), maxBatch)
	if n == 0 {
		return nil
	}
	batch := make([]*writeReq, n)
	copy(batch, q.reqs)
	q.reqs = append(q.reqs[:0], q.reqs[n:]...)
	return batch
}

// remove takes req out of the queue; false when a leader already took it.
func (q *writeQueue) remove(req *writeReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, r := range q.reqs {
		if r == req {
			q.reqs = append(q.reqs[:i], q.reqs[i+1:]...)
			return true
		}
	}
	return false
}

// submit runs one writing statement and returns the rows it changed. For
// a statement that returns a row (RETURNING), dest receives it and the
// count is 1 when it returned one, 0 when none.
func (s *Store) submit(ctx context.Context, id stmtID, args, dest []any) (int64, error) {
	select {
	case s.gate <- struct{}{}: // nobody is writing
		return s.runFirst(ctx, id, args, dest)
	default:
	}
	req := &writeReq{ctx: ctx, id: id, args: args, dest: dest, done: make(chan struct{})}
	s.queue.mu.Lock()
	s.queue.reqs = append(s.queue.reqs, req)
	s.queue.mu.Unlock()

	select {
	case s.gate <- struct{}{}:
		s.lead(req)
		return req.n, req.err
	default:
	}
	if s.onWait != nil {
		s.onWait()
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	for {
		select {
		case <-req.done:
			return req.n, req.err
		case s.gate <- struct{}{}:
			s.lead(req)
			return req.n, req.err
		case <-ctx.Done():
			return s.abandon(req, func() error { return errWaiting(ctx.Err()) })
		case <-t.C:
			if d := s.sinceProgress(); d < s.wait {
				t.Reset(s.wait - d) // the queue moves: keep waiting
				continue
			}
			return s.abandon(req, func() error { return &LockTimeoutError{Wait: s.wait} })
		}
	}
}

func errWaiting(err error) error { return &waitError{err} }

type waitError struct{ err error }

func (e *waitError) Error() string { return "waiting for the write lock: " + e.err.Error() }
func (e *waitError) Unwrap() error { return e.err }

// abandon gives up on req unless a leader has it already; then its result is
// at most one group away.
func (s *Store) abandon(req *writeReq, reason func() error) (int64, error) {
	if s.queue.remove(req) {
		return 0, reason()
	}
	<-req.done
	return req.n, req.err
}

// runFirst runs the statement of a caller that found the gate open: alone,
// as raw database/sql would, or at the head of a group when statements were
// queued in the meantime. It opens the gate again.
func (s *Store) runFirst(ctx context.Context, id stmtID, args, dest []any) (int64, error) {
	defer s.unlock()
	if queued := s.queue.take(); len(queued) > 0 {
		req := &writeReq{ctx: ctx, id: id, args: args, dest: dest, done: make(chan struct{})}
		s.runBatch(append([]*writeReq{req}, queued...))
		return req.n, req.err
	}
	st, err := s.stmts[id].get(ctx, s.db)
	if err != nil {
		return 0, err
	}
	return execStmt(ctx, st, args, dest)
}

// execStmt runs a writing statement and returns the rows it changed; for
// one that returns a row (dest not nil) it scans that row into dest and
// returns 1, or 0 when the statement returned none (changed nothing).
func execStmt(ctx context.Context, st *sql.Stmt, args, dest []any) (int64, error) {
	if dest != nil {
		switch err := st.QueryRowContext(ctx, args...).Scan(dest...); {
		case err == nil:
			return 1, nil
		case errors.Is(err, sql.ErrNoRows):
			return 0, nil
		default:
			return 0, err
		}
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// lead runs queued statements, holding the gate, until mine has run, then
// opens the gate for the next leader (or an InTx).
func (s *Store) lead(mine *writeReq) {
	defer s.unlock()
	for {
		select {
		case <-mine.done:
			return
		default:
		}
		batch := s.queue.take()
		if len(batch) == 0 {
			return // unreachable: mine is queued until it is done
		}
		s.runBatch(batch)
	}
}

// runBatch runs batch, grouped when it has more than one live statement, and
// tells every caller its result.
func (s *Store) runBatch(batch []*writeReq) {
	defer func() {
		s.progressed()
		for _, r := range batch {
			close(r.done)
		}
	}()
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	for len(live) > 0 {
		if len(live) == 1 {
			s.runAlone(live[0])
			return
		}
		failed, err := s.runGrouped(live)
		if s.onGroup != nil {
			s.onGroup(len(live), err == nil)
		}
		switch {
		case err == nil:
			return
		case failed < 0 || isBusy(err):
			// BEGIN or COMMIT failed, or the write lock could not be had:
			// nothing committed, and every statement would meet the same.
			for _, r := range live {
				r.n, r.err = 0, err
			}
			return
		}
		// One statement failed on its own account: it alone reports the
		// error; the others, rolled back with it, run again.
		live[failed].n, live[failed].err = 0, err
		live = append(live[:failed:failed], live[failed+1:]...)
	}
}

func (s *Store) runAlone(r *writeReq) {
	st, err := s.stmts[r.id].get(r.ctx, s.db)
	if err != nil {
		r.err = err
		return
	}
	r.n, r.err = execStmt(r.ctx, st, r.args, r.dest)
}

// runGrouped runs batch in one transaction. On failure it returns the error
// and the index of the statement that failed, or -1 when BEGIN or COMMIT did.
// The transaction's first statement writes, so it takes SQLite's write lock
// before reading anything, whether the pool begins IMMEDIATE or DEFERRED.
// It runs under a background context: it serves many callers, and SQLite's
// busy timeout bounds its waits.
func (s *Store) runGrouped(batch []*writeReq) (failed int, err error) {
	ctx := context.Background()
	// Prepared before the transaction takes a connection: a ":memory:"
	// database has only one.
	var stmts [numStmts]*sql.Stmt
	for i, r := range batch {
		if stmts[r.id] == nil {
			st, err := s.stmts[r.id].get(ctx, s.db)
			if err != nil {
				return i, err
			}
			stmts[r.id] = st
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return -1, err
	}
	var inTx [numStmts]*sql.Stmt // each statement bound to the transaction once
	for i, r := range batch {
		if inTx[r.id] == nil {
			inTx[r.id] = tx.StmtContext(ctx, stmts[r.id])
		}
		n, err := execStmt(ctx, inTx[r.id], r.args, r.dest)
		r.n = n
		if err != nil {
			_ = tx.Rollback()
			return i, err
		}
	}
	if err := tx.Commit(); err != nil {
		return -1, err
	}
	return 0, nil
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED: the
// write lock could not be had within the busy timeout.
func isBusy(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
		return false
	}
	msg := err.Error() // drivers without a Code method
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
}

// progressed records that a writer finished.
func (s *Store) progressed() { s.lastProgress.Store(int64(time.Since(s.epoch))) }

// sinceProgress returns how long ago a writer last finished.
func (s *Store) sinceProgress() time.Duration {
	return time.Since(s.epoch) - time.Duration(s.lastProgress.Load())
}
