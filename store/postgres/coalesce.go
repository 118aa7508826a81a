package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemkit/idemkit/internal/coalesce"
)

// Coalescing: concurrent Claims (their first INSERT) and Completes of one
// Store are sent together, as one multi-row statement per batch, by
// internal/coalesce. A caller alone runs today's single-key statement, in
// its own goroutine, so one caller's latency does not change; after a
// spell of concurrent callers, the first caller of the next spell waits a
// moment for the others (gather.go). A batch only
// ever decides what its single-key statement would have decided for each
// row (a new key inserted, a live lease completed); every other case goes on
// through the single-key path, so the decision logic lives in one place.

// claimReq is one claim's INSERT, as sent alone or in a batch.
type claimReq struct {
	key, fingerprint, token string
	lease                   pgtype.Interval
	hold                    *gathering // a gathering's hold (see gather.go): no statement
}

// inserted is the result of a claim's INSERT: whether it inserted the key,
// and the lease's end and the fence when it did (the attempt is 1).
type inserted struct {
	ok    bool
	until time.Time
	fence int64
}

// completeReq is one Complete's UPDATE.
type completeReq struct {
	key, token string
	response   []byte
	retention  pgtype.Interval
	hold       *gathering // a gathering's hold (see gather.go): no statement
}

// completed is what a Complete's UPDATE found: done (stored, or already
// completed by the token), lost (the single-key statement matched no row),
// or neither (a batch that did not match the row: run the single-key
// statement, which decides).
type completed uint8

const (
	completeRetry completed = iota
	completeDone
	completeLost
)

// batchers holds a Store's batchers; nil when coalescing is off.
type batchers struct {
	claims    *coalesce.Batcher[claimReq, inserted]
	completes *coalesce.Batcher[completeReq, completed]
	// Their callers' spells and gatherings (gather.go).
	claimers, completers gatherer
}

func (s *Store) newBatchers() *batchers {
	b := new(batchers)
	b.claims = coalesce.New(s.opts.slots, s.opts.maxBatch, s.insertOne, timed(&b.claimers, s.insertMany))
	b.completes = coalesce.New(s.opts.slots, s.opts.maxBatch, s.completeOne, timed(&b.completers, s.completeMany))
	return b
}

// claim runs a claim's INSERT through the claims' batcher.
func (b *batchers) claim(ctx context.Context, q claimReq) (inserted, error) {
	return do(ctx, &b.claimers, b.claims, q, func(g *gathering) claimReq { return claimReq{hold: g} })
}

// complete runs a Complete's UPDATE through the completes' batcher.
func (b *batchers) complete(ctx context.Context, q completeReq) (completed, error) {
	return do(ctx, &b.completers, b.completes, q, func(g *gathering) completeReq { return completeReq{hold: g} })
}

// coalescing reports whether calls with ctx may be batched: coalescing is on
// and ctx carries no transaction of this Store (a transaction's statements
// are its own, never another caller's).
func (s *Store) coalescing(ctx context.Context) bool {
	if s.batch == nil {
		return false
	}
	_, inTx := s.ownTx(ctx)
	return !inTx
}

// insertOne runs one claim's INSERT alone: exactly the statement Claim runs
// without coalescing.
func (s *Store) insertOne(ctx context.Context, q claimReq) (inserted, error) {
	var r inserted
	if q.hold != nil {
		holdFor(q.hold, true)
		return r, nil
	}
	err := s.db.QueryRow(ctx, s.sql.claim, q.key, q.fingerprint, q.token, q.lease).Scan(&r.until, &r.fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, nil
	}
	r.ok = err == nil
	return r, err
}

// insertMany runs the INSERTs of a batch of claims as one statement. Each
// key that statement inserted is Acquired by its caller; every other call
// (its key existed, or another call of the batch had the same key) is told
// "not inserted" and goes on as a single-key claim whose INSERT met a row:
// it reads the row and decides from it.
func (s *Store) insertMany(ctx context.Context, calls []*coalesce.Call[claimReq, inserted]) {
	if calls = withoutHolds(calls, func(q *claimReq) *gathering { return q.hold }); len(calls) == 0 {
		return
	}
	order := uniqueByKey(len(calls), func(i int) string { return calls[i].Req.key })
	keys := make([]string, len(order))
	fps := make([]string, len(order))
	toks := make([]string, len(order))
	leases := make([]pgtype.Interval, len(order))
	at := make(map[string]int, len(order))
	for j, i := range order {
		q := &calls[i].Req
		keys[j], fps[j], toks[j], leases[j] = q.key, q.fingerprint, q.token, q.lease
		at[q.key] = i
	}
	res := make([]inserted, len(calls))
	err := queryEach(ctx, s.db, s.sql.claimMany, func(rows pgx.Rows) error {
		var key string
		var r inserted
		if err := rows.Scan(&key, &r.until, &r.fence); err != nil {
			return err
		}
		if i, ok := at[key]; ok {
			r.ok = true
			res[i] = r
		}
		return nil
	}, keys, fps, toks, leases)
	settle(calls, res, err, s.insertOne)
}

// completeOne runs one Complete's UPDATE alone: exactly the statement
// Complete runs without coalescing.
func (s *Store) completeOne(ctx context.Context, q completeReq) (completed, error) {
	if q.hold != nil {
		holdFor(q.hold, true)
		return completeRetry, nil
	}
	tag, err := s.db.Exec(ctx, s.sql.complete, q.key, q.token, q.response, q.retention)
	switch {
	case err != nil:
		return completeRetry, err
	case tag.RowsAffected() == 0:
		return completeLost, nil
	}
	return completeDone, nil
}

// completeMany runs the UPDATEs of a batch of Completes as one statement,
// with the single-key statement's conditions and SET. A key it returns is
// done; every other call (no row matched, or another call of the batch had
// the same key) is told to run the single-key statement, which decides.
func (s *Store) completeMany(ctx context.Context, calls []*coalesce.Call[completeReq, completed]) {
	if calls = withoutHolds(calls, func(q *completeReq) *gathering { return q.hold }); len(calls) == 0 {
		return
	}
	order := uniqueByKey(len(calls), func(i int) string { return calls[i].Req.key })
	keys := make([]string, len(order))
	toks := make([]string, len(order))
	resps := make([][]byte, len(order))
	rets := make([]pgtype.Interval, len(order))
	at := make(map[string]int, len(order))
	for j, i := range order {
		q := &calls[i].Req
		keys[j], toks[j], resps[j], rets[j] = q.key, q.token, q.response, q.retention
		at[q.key] = i
	}
	res := make([]completed, len(calls))
	err := queryEach(ctx, s.db, s.sql.completeMany, func(rows pgx.Rows) error {
		var key string
		if err := rows.Scan(&key); err != nil {
			return err
		}
		if i, ok := at[key]; ok {
			res[i] = completeDone
		}
		return nil
	}, keys, toks, resps, rets)
	settle(calls, res, err, s.completeOne)
}

// withoutHolds returns calls without the gatherings' holds, each opened and
// told it is done: a hold that queued behind other calls has nothing to
// keep.
func withoutHolds[Q, R any](calls []*coalesce.Call[Q, R], hold func(*Q) *gathering) []*coalesce.Call[Q, R] {
	out := calls[:0:0]
	for _, c := range calls {
		if g := hold(&c.Req); g != nil {
			holdFor(g, false)
			var zero R
			c.Set(zero, nil)
			continue
		}
		out = append(out, c)
	}
	if len(out) == len(calls) {
		return calls
	}
	return out
}

// settle tells a batch's callers the outcome of its statement: res[i] for
// calls[i] when it succeeded; when the server rejected it for a row's data
// (rowError), each call run again alone by one, so one call's bad row never
// fails the others; otherwise err for every call.
func settle[Q, R any](calls []*coalesce.Call[Q, R], res []R, err error, one func(context.Context, Q) (R, error)) {
	for i, c := range calls {
		switch {
		case err == nil:
			c.Set(res[i], nil)
		case rowError(err):
			c.Set(one(c.Context(), c.Req))
		default:
			var zero R
			c.Set(zero, err)
		}
	}
}

// uniqueByKey returns the indexes 0..n-1 of the first call with each key,
// sorted by key (byte order, as the key column's COLLATE "C"): every batch
// locks its rows in the same order, so two batches never deadlock on each
// other.
func uniqueByKey(n int, key func(i int) string) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(key(a), key(b)) })
	out := order[:0]
	for j, i := range order {
		if j > 0 && key(i) == key(order[j-1]) {
			continue // a duplicate: the single-key path decides it
		}
		out = append(out, i)
	}
	return out
}

// queryEach runs q and calls each for every row. Rows count only once the
// statement (and its autocommit) succeeded: the caller keeps what each
// gathered only when queryEach returns nil.
func queryEach(ctx context.Context, db DB, q string, each func(pgx.Rows) error, args ...any) error {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// rowError reports whether err is the server rejecting the statement for
// what one of its rows holds (a data exception or a violated constraint),
// or rolling it back for a deadlock or a serialization failure: the
// statement changed nothing, and the batch's calls are run again one by
// one, so one call's bad row never fails the others. Every other error (the
// connection failed, the server shut down) is reported to every call: the
// statement may or may not have committed, as for a single-key statement.
func rowError(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch {
	case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
		return true
	case strings.HasPrefix(pe.Code, "22"), strings.HasPrefix(pe.Code, "23"):
		return true
	}
	return false
}
