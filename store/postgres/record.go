package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idemkit/store"
)

// stats counts what tests want to see happen; shared by a Store and the
// Stores InTx binds to its transactions.
type stats struct {
	rereads atomic.Int64 // claims whose INSERT met an existing row and read it

	// found steers Claim's choice of statement: up by one (to +foundCap)
	// for each claim that met an existing row, down by one (to -foundCap)
	// for each that inserted one; above zero, claims start with a plain
	// SELECT (statements.reread). Either way is correct for any key; the
	// choice only saves work: the insert's conflict probe and executor on a
	// replay, or a round trip on a new key.
	found atomic.Int32
	// pin, set by tests before any claim, fixes the choice: 1 always
	// insert first, 2 always read first.
	pin int8
}

const foundCap = 8

// readFirst reports whether recent claims mostly met existing rows.
func (st *stats) readFirst() bool {
	if st.pin != 0 {
		return st.pin == 2
	}
	return st.found.Load() > 0
}

// claimed records what a claim met. It writes only when the score moves,
// so a steady workload leaves the cache line shared.
func (st *stats) claimed(existing bool) {
	v := st.found.Load()
	switch {
	case existing && v < foundCap:
		st.found.CompareAndSwap(v, v+1)
	case !existing && v > -foundCap:
		st.found.CompareAndSwap(v, v-1)
	}
}

// Complete implements store.Store with one token-checked UPDATE: it stores
// response when token holds a live lease on key, returns nil and keeps the
// first response and retention when token already completed it, and returns
// ErrLeaseLost otherwise (the lease lapsed, or another token holds or
// completed the key). With coalescing (WithCoalescing), the UPDATEs of
// concurrent Completes are sent as one statement.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("postgres: complete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: complete: %w", err)
	}
	if response == nil {
		response = []byte{} // bytea '' rather than NULL: a completed record always has a response
	}
	if len(response) >= largeResponse {
		// Never batched: one large response would hold up the batch, and
		// a bytea[] argument is copied several times over.
		tag, ok, err := completeWire(ctx, s.conn(ctx), s.sql.complete, key, string(token), response, interval(retention))
		if ok {
			return completeResult(tag, err)
		}
	}
	if s.coalescing(ctx) {
		// The same UPDATE, alone or in one statement with concurrent
		// Completes' (see WithCoalescing).
		res, err := s.batch.complete(ctx, completeReq{key: key, token: string(token), response: response, retention: interval(retention)})
		switch {
		case err != nil:
			return fmt.Errorf("postgres: complete: %w", err)
		case res == completeDone:
			return nil
		case res == completeLost:
			return fmt.Errorf("postgres: complete: %w", store.ErrLeaseLost)
		}
		// A batch did not match the row: the single-key statement decides.
	}
	return completeResult(s.conn(ctx).Exec(ctx, s.sql.complete, key, string(token), response, interval(retention)))
}

// completeResult returns Complete's result from its statement's.
func completeResult(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("postgres: complete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: complete: %w", store.ErrLeaseLost)
	}
	return nil
}

// Release implements store.Store with one DELETE of the live lease held by
// token; any other record is left alone, a lapsed lease of token's too (it
// stays for store.LapsedKept, so that the claim taking it over counts the
// attempt).
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("postgres: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: release: %w", err)
	}
	if _, err := s.conn(ctx).Exec(ctx, s.sql.release, key, string(token)); err != nil {
		return fmt.Errorf("postgres: release: %w", err)
	}
	return nil
}

// Renew implements store.Store with one UPDATE ... WHERE of the live lease
// token holds on key (in progress, its token, its lease not over on the
// server's clock), which moves its end to lease from now and keeps its
// attempt and fence. When no row matches (the key is absent, released,
// lapsed, completed, or held by another token) it returns an error matching
// store.ErrLeaseLost, having written nothing: it never creates or revives a
// record, so a renewal that arrives after a Release leaves the key free.
// Renewals are never coalesced; within InTx it runs in the transaction.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("postgres: renew: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: renew: %w", err)
	}
	tag, err := s.conn(ctx).Exec(ctx, s.sql.renew, key, string(token), interval(lease))
	if err != nil {
		return fmt.Errorf("postgres: renew: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: renew: %w", store.ErrLeaseLost)
	}
	return nil
}

// Get implements store.Store: one SELECT of the live record, ErrNotFound when
// there is none.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	var r row
	err := s.conn(ctx).QueryRow(ctx, s.sql.get, key).
		Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt, &r.attempt, &r.fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("postgres: get: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	return r.record(key), nil
}

// Purge implements store.Purger: it deletes records whose retention is over
// and records in progress whose lease lapsed store.LapsedKept ago or more
// (a lapsed lease is kept that long, absent to Claim and Get, so that the
// claim taking it over counts the attempt), in DELETE statements of at most
// the purge batch (WithPurgeBatch) rows each, found through the index on
// expires_at and skipping rows another transaction has locked, so it never
// holds many locks for long. It returns how many rows it deleted; when ctx
// is done it stops between batches with ctx's error, and what it deleted
// stays deleted. Call it from a periodic job.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("postgres: purge: %w", err)
		}
		tag, err := s.conn(ctx).Exec(ctx, s.sql.purge, s.opts.purgeBatch)
		if err != nil {
			return total, fmt.Errorf("postgres: purge: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.opts.purgeBatch) {
			return total, nil
		}
	}
}
