package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// maxClaimAttempts bounds Claim's retries when the key keeps changing between
// its statement and the read that reports the record (released or lapsed in
// between). Each retry means another caller made progress.
const maxClaimAttempts = 16

// runner runs the Store's statements: on its database, one write at a time
// through the Store's gate, or inside a transaction (tx != nil) that already
// holds SQLite's write lock.
type runner struct {
	s  *Store
	tx *sql.Tx
}

// runner returns the runner for a call with ctx: inside the transaction ctx
// carries when that transaction is one of this Store's.
func (s *Store) runner(ctx context.Context) runner {
	if st := stateFrom(ctx); st != nil && st.s == s {
		return runner{s: s, tx: st.tx}
	}
	return runner{s: s}
}

// stmt returns statement id ready to run on the runner's database or
// transaction.
func (r runner) stmt(ctx context.Context, id stmtID) (*sql.Stmt, error) {
	ps := &r.s.stmts[id]
	if r.tx == nil {
		return ps.get(ctx, r.s.db)
	}
	if st := ps.p.Load(); st != nil {
		return r.tx.StmtContext(ctx, st), nil
	}
	// Not prepared on the database yet (Migrate and Open prepare them all).
	// Prepare it in the transaction, whose connection may be the database's
	// only one (":memory:"): correct, but prepared again on every call.
	st, err := r.tx.PrepareContext(ctx, ps.query)
	if err != nil {
		return nil, prepareError(err)
	}
	return st, nil
}

// write runs a statement that writes and returns how many rows it changed:
// through the Store's queue of writes (see batch.go), or in the transaction.
func (r runner) write(ctx context.Context, id stmtID, args ...any) (int64, error) {
	return r.writeRow(ctx, id, nil, args...)
}

// writeRow is write for a statement that returns a row when it changes one
// (RETURNING): the row is scanned into dest, and the count is 1 when it
// was returned, 0 when the statement changed nothing. A nil dest is write.
func (r runner) writeRow(ctx context.Context, id stmtID, dest []any, args ...any) (int64, error) {
	if r.s.onStmt != nil {
		r.s.onStmt(id)
	}
	if r.tx == nil {
		return r.s.submit(ctx, id, args, dest)
	}
	st, err := r.stmt(ctx, id)
	if err != nil {
		return 0, err
	}
	return execStmt(ctx, st, args, dest)
}

// record runs a statement that reads key's row (stmtRead or stmtGet) and
// scans it; no row is store.ErrNotFound. Outside a transaction at most
// cap(s.reads) run at once, so a crowd of readers cannot grow the pool
// without bound (New's *sql.DB may have no limit). The bound is the pool's
// size, not one less: a reader never holds the write gate, so a writer that
// finds every connection taken waits only for reads already running, while a bound
// below the pool made one of as many goroutines as connections wait for
// every read it ran (replays at 8 goroutines ran ~20% slower than raw
// database/sql on the same pool).
func (r runner) record(ctx context.Context, id stmtID, key string, args ...any) (store.Record, error) {
	if r.s.onStmt != nil {
		r.s.onStmt(id)
	}
	if r.tx == nil {
		select {
		case r.s.reads <- struct{}{}:
			defer func() { <-r.s.reads }()
		case <-ctx.Done():
			return store.Record{}, ctx.Err()
		}
	}
	st, err := r.stmt(ctx, id)
	if err != nil {
		return store.Record{}, err
	}
	return scanRecord(st.QueryRowContext(ctx, args...), key)
}

// Claim tries to take key for token; see store.Store. A claim that would
// change nothing (a replay, a mismatch, another token's claim) is answered
// from one SELECT, without waiting for any writer; the decision to acquire is
// one INSERT … ON CONFLICT DO UPDATE … WHERE statement, and when that changes
// nothing the record is read again to report it. Which of the two runs first
// follows the Store's recent claims (see runner.claim).
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	return s.runner(ctx).claim(ctx, key, fingerprint, token, lease)
}

// claimHintMax bounds Store.claimHint, so that a change of load turns the
// order round after a few claims.
const claimHintMax = 4

// claim either reads first or writes first. Reading first, a live record the
// claim statement would leave as it is is reported without a write, so it
// never waits for the write gate or the write lock; an absent or lapsed key,
// or the caller's own claim to renew, costs a SELECT and the write. Writing
// first is a plain INSERT … ON CONFLICT DO NOTHING (stmtInsert): a new key
// costs that one statement (as raw database/sql would); a key with a row
// costs it and then the read-first path (a SELECT, and the claim statement
// for a lapsed or own lease). Both are correct whatever the row: the unique
// key and the claim statement's ON CONFLICT … WHERE alone decide who holds
// the key, and SQLite runs one writer at a time, so the SELECT after a write
// that changed nothing sees the row that made it change nothing, or its
// successor. The Store writes first when its recent claims mostly acquired
// (claimHint), and then only if the write gate is open at that instant
// (tryWrite): a claim never queues behind other writes to learn that it
// changes nothing.
func (r runner) claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (c store.Claim, err error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
	}
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
	}
	defer func() {
		if err == nil {
			r.s.hint(c.Outcome == store.Acquired)
		}
	}()
	writeFirst := r.s.claimHint.Load() > 0
	for range maxClaimAttempts {
		now := micros(r.s.now())
		until := now + durMicros(lease)
		var (
			n              int64
			attempt, fence int64
		)
		if writeFirst {
			writeFirst = false // a retry reads first
			// A plain INSERT of an absent key: its attempt and fence are
			// those stmtClaim gives a new row, store.Successor's for a key
			// with no record, so it needs no RETURNING.
			n, _, err = r.tryWrite(ctx, stmtInsert, []any{key, fingerprint, string(token), until, now}, nil)
			if err != nil {
				return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
			}
			a, f := store.Successor(store.Record{}, false, token, fromMicros(now))
			attempt, fence = int64(a), int64(f)
		}
		if n == 0 {
			// Not written first, or the key has a row, which may be one
			// to take (lapsed, or the caller's own lease): judged from
			// the row as a read-first claim judges it.
			rec, err := r.record(ctx, stmtRead, key, key)
			switch {
			case err == nil:
				if f := store.Classify(rec, fingerprint, token, fromMicros(now)); !f.Write {
					return store.Claim{Outcome: f.Outcome, Record: rec}, nil
				}
			case !errors.Is(err, store.ErrNotFound):
				return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
			}
			// Declared and boxed here, not before the read: what Scan
			// writes through escapes to the heap, one allocation that a
			// claim which only reads would make too (attempt and fence
			// stay on the stack).
			var ret struct{ attempt, fence int64 }
			if n, err = r.writeRow(ctx, stmtClaim, []any{&ret.attempt, &ret.fence}, key, fingerprint, string(token), until, now); err != nil {
				return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
			}
			attempt, fence = ret.attempt, ret.fence
		}
		if n > 0 {
			return store.Claim{Outcome: store.Acquired, Record: store.Record{
				Key:         key,
				Fingerprint: fingerprint,
				Status:      store.StatusInProgress,
				Token:       token,
				LockedUntil: fromMicros(until),
				ExpiresAt:   fromMicros(until),
				Attempt:     uint32(attempt),
				Fence:       uint64(fence),
			}}, nil
		}
		// Taken by someone else (before or in between), or completed:
		// report it.
		rec, err := r.record(ctx, stmtRead, key, key)
		if errors.Is(err, store.ErrNotFound) {
			continue // released or purged since: claim again
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("sqlite: claim: %w", err)
		}
		f := store.Classify(rec, fingerprint, token, fromMicros(now))
		if f.Lapsed {
			continue // lapsed: absent, claim again
		}
		// The caller's own claim (Write) was renewed by a concurrent retry
		// of the same claim: it holds the key.
		return store.Claim{Outcome: f.Outcome, Record: rec}, nil
	}
	return store.Claim{}, fmt.Errorf("sqlite: claim: the key changed under %d attempts in a row; try again", maxClaimAttempts)
}

// hint moves claimHint one step towards writing first (a claim acquired)
// or reading first (it found a record it would not change), within
// ±claimHintMax. Racing updates may lose a step; it is only a hint.
func (s *Store) hint(acquired bool) {
	h := s.claimHint.Load()
	switch {
	case acquired && h < claimHintMax:
		s.claimHint.Store(h + 1)
	case !acquired && h > -claimHintMax:
		s.claimHint.Store(h - 1)
	}
}

// tryWrite runs a writing statement if it need not wait: in the
// transaction, or through the write gate when the gate is open (as submit
// does). ok is false, and nothing ran, when another write holds the gate.
// dest is as for writeRow.
func (r runner) tryWrite(ctx context.Context, id stmtID, args, dest []any) (n int64, ok bool, err error) {
	if r.tx != nil {
		n, err = r.writeRow(ctx, id, dest, args...)
		return n, true, err
	}
	select {
	case r.s.gate <- struct{}{}:
		if r.s.onStmt != nil {
			r.s.onStmt(id)
		}
		n, err = r.s.runFirst(ctx, id, args, dest)
		return n, true, err
	default:
		return 0, false, nil
	}
}

// Complete stores response for key and marks it completed; see store.Store.
// It is one UPDATE guarded by key, token and liveness; on a record the token
// already completed it keeps the first response and retention.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	return s.runner(ctx).complete(ctx, key, token, response, retention)
}

func (r runner) complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: complete: %w", err)
	}
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("sqlite: complete: %w", err)
	}
	if response == nil {
		response = []byte{}
	}
	now := micros(r.s.now())
	n, err := r.write(ctx, stmtComplete, key, string(token), response, now+durMicros(retention), now)
	if err != nil {
		return fmt.Errorf("sqlite: complete: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("sqlite: complete: %w", store.ErrLeaseLost)
	}
	return nil
}

// Release gives up token's claim on key; see store.Store. It is one DELETE
// guarded by key, token, status and liveness, so it never removes another
// claim, a completed record, or the token's own lapsed lease (kept for the
// attempt count of the claim that takes it over).
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	return s.runner(ctx).release(ctx, key, token)
}

func (r runner) release(ctx context.Context, key string, token store.Token) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: release: %w", err)
	}
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("sqlite: release: %w", err)
	}
	if _, err := r.write(ctx, stmtRelease, key, string(token), micros(r.s.now())); err != nil {
		return fmt.Errorf("sqlite: release: %w", err)
	}
	return nil
}

// Renew extends the live lease token holds on key to lease from now; see
// store.Store. It is one UPDATE guarded by key, token, status and
// liveness: when it changes no row (the key is absent, released, lapsed,
// completed or another token's) it returns an error matching
// store.ErrLeaseLost, having written nothing. Attempt and Fence stay.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return s.runner(ctx).renew(ctx, key, token, lease)
}

func (r runner) renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: renew: %w", err)
	}
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("sqlite: renew: %w", err)
	}
	now := micros(r.s.now())
	n, err := r.write(ctx, stmtRenew, key, string(token), now, now+durMicros(lease))
	if err != nil {
		return fmt.Errorf("sqlite: renew: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("sqlite: renew %q: %w", key, store.ErrLeaseLost)
	}
	return nil
}

// Get returns the live record for key, or an error matching store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	return s.runner(ctx).get(ctx, key)
}

func (r runner) get(ctx context.Context, key string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get: %w", err)
	}
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get: %w", err)
	}
	rec, err := r.record(ctx, stmtGet, key, key, micros(r.s.now()))
	if err != nil {
		return store.Record{}, fmt.Errorf("sqlite: get: %w", err)
	}
	return rec, nil
}

// recordRow is what scanRecord scans a row of stmtRead or stmtGet into
// (readColumns): the columns, and dest, the pointers to them that Scan
// takes. It is pooled (rowPool): a new one per read made every column, and
// the slice of pointers, one heap allocation each (they escape through
// Scan's interface arguments).
type recordRow struct {
	fingerprint, token string
	state              int64 // attempt<<2 | status
	response           []byte
	expires, fence     int64
	dest               [6]any
}

var rowPool = sync.Pool{New: func() any {
	row := &recordRow{}
	row.dest = [6]any{&row.fingerprint, &row.token, &row.state, &row.response, &row.expires, &row.fence}
	return row
}}

// scanRecord reads a row of stmtRead or stmtGet. No row is store.ErrNotFound.
// LockedUntil is derived from the status and ExpiresAt (see readColumns).
func scanRecord(sqlRow *sql.Row, key string) (store.Record, error) {
	row := rowPool.Get().(*recordRow)
	defer func() {
		// Nothing the caller now owns stays reachable from the pool.
		row.fingerprint, row.token, row.response = "", "", nil
		rowPool.Put(row)
	}()
	err := sqlRow.Scan(row.dest[:]...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, err
	}
	rec := store.Record{
		Key:         key,
		Fingerprint: row.fingerprint,
		Token:       store.Token(row.token),
		ExpiresAt:   fromMicros(row.expires),
		Attempt:     uint32(row.state >> 2),
		Fence:       uint64(row.fence),
	}
	switch row.state & 3 {
	case statusInProgress:
		rec.Status = store.StatusInProgress
		rec.LockedUntil = rec.ExpiresAt
	case statusCompleted:
		rec.Status = store.StatusCompleted
		rec.Response = row.response
		if rec.Response == nil {
			rec.Response = []byte{}
		}
	default:
		return store.Record{}, errors.New("record has an unknown status (neither 1 nor 2)")
	}
	return rec, nil
}

// Purge deletes records whose retention is over and in-progress records
// whose lease lapsed more than store.LapsedKept ago (a lapsed record is
// kept that long for the attempt count of the claim that takes it over),
// at most the purge batch (WithPurgeBatch) per statement, each statement
// its own short write, until none is left. It returns how many it
// deleted; when ctx is done it stops between batches.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	return s.runner(ctx).purge(ctx)
}

func (r runner) purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("sqlite: purge: %w", err)
		}
		now := micros(r.s.now())
		n, err := r.write(ctx, stmtPurge, now, r.s.batch, now-store.LapsedKept.Microseconds())
		if err != nil {
			return total, fmt.Errorf("sqlite: purge: %w", err)
		}
		total += n
		if r.s.onPurgeBatch != nil {
			r.s.onPurgeBatch(n)
		}
		if n < int64(r.s.batch) {
			return total, nil
		}
	}
}
