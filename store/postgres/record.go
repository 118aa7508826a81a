package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/store"
)

// stats counts what tests want to see happen; shared by a Store and the
// Stores InTx binds to its transactions.
type stats struct {
	rereads atomic.Int64 // claims whose first statement found a row committed after its snapshot
}

// Complete implements store.Store with one token-checked UPDATE: it stores
// response when token holds a live lease on key, returns nil and keeps the
// first response and retention when token already completed it, and returns
// ErrLeaseLost otherwise (the lease lapsed, or another token holds or
// completed the key).
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
	tag, err := s.conn(ctx).Exec(ctx, s.sql.complete, key, string(token), response, interval(retention))
	if err != nil {
		return fmt.Errorf("postgres: complete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: complete: %w", store.ErrLeaseLost)
	}
	return nil
}

// Release implements store.Store with one DELETE of the record in progress
// held by token; any other record is left alone.
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
		Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("postgres: get: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: get: %w", err)
	}
	return r.record(key), nil
}

// Purge implements store.Purger: it deletes records whose retention is over
// and records in progress whose lease lapsed, in DELETE statements of at most
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
