package spanner

import (
	"context"
	"fmt"
	"time"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
)

// MaxResponse is the largest response Complete stores: Spanner keeps at
// most 10 MiB in one BYTES value. A larger one is refused with
// store.ErrInvalid before anything is written (the idem engine then keeps
// the key completed without its body).
const MaxResponse = 10 << 20

// Claim implements store.Store. It runs one read-write transaction: one
// statement reads the server's time and the key's row, the decision is made
// from those alone, and the new or renewed row (deadline: that time plus
// lease) is written in the same transaction, so Spanner's locks decide
// between concurrent claims. A Claim that decides Completed, InProgress or
// Mismatch writes nothing.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("spanner: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("spanner: claim: %w", err)
	}
	var c store.Claim
	err := s.transact(ctx, "claim", func(ctx context.Context, t txn) error {
		now, stored, err := s.read(ctx, t.tx, key)
		if err != nil {
			return err
		}
		live := liveRow(stored, now)
		switch {
		case live != nil && live.Fingerprint != fingerprint:
			c = store.Claim{Outcome: store.Mismatch, Record: live.record(key)}
			return nil
		case live != nil && live.Status == statusCompleted:
			c = store.Claim{Outcome: store.Completed, Record: live.record(key)}
			return nil
		case live != nil && live.Token != string(token):
			c = store.Claim{Outcome: store.InProgress, Record: live.record(key)}
			return nil
		}
		// Absent, or held by this token: take it, or renew the lease. The
		// attempt and the fence follow the row read (a lapsed lease, an
		// ended retention, this token's live lease), at the server's time
		// of the read, in this transaction.
		var prev store.Record
		if stored != nil {
			prev = stored.record(key)
		}
		attempt, fence := store.Successor(prev, stored != nil, token, now)
		until := now.Add(lease)
		r := row{Fingerprint: fingerprint, Token: string(token), Status: statusInProgress,
			LockedUntil: sp.NullTime{Time: until, Valid: true}, ExpiresAt: until,
			Attempt: int64(attempt), Fence: int64(fence)}
		if err := s.put(ctx, t, key, stored != nil, r); err != nil {
			return err
		}
		c = store.Claim{Outcome: store.Acquired, Record: r.record(key)}
		return nil
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

// Complete implements store.Store: in one read-write transaction it reads
// the server's time and the row, and completes it (kept until that time
// plus retention) only when token holds a live lease. A Complete by the
// token that completed the key already returns nil and writes nothing.
// A response longer than MaxResponse is store.ErrInvalid.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("spanner: complete: %w", err)
	}
	if len(response) > MaxResponse {
		return fmt.Errorf("spanner: complete: %w: response is %d bytes, more than the %d (10 MiB) Spanner keeps in one value", store.ErrInvalid, len(response), MaxResponse)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spanner: complete: %w", err)
	}
	var lost bool
	err := s.transact(ctx, "complete", func(ctx context.Context, t txn) error {
		now, stored, err := s.read(ctx, t.tx, key)
		if err != nil {
			return err
		}
		live := liveRow(stored, now)
		lost = false
		switch {
		case live == nil || live.Token != string(token):
			lost = true
			return nil
		case live.Status == statusCompleted:
			return nil // a retried Complete: the first response stays
		}
		r := row{Fingerprint: live.Fingerprint, Token: live.Token, Status: statusCompleted,
			Response: response, ExpiresAt: now.Add(retention), Attempt: live.Attempt, Fence: live.Fence}
		return s.put(ctx, t, key, true, r)
	})
	if err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("spanner: complete: %w", store.ErrLeaseLost)
	}
	return nil
}

// Release implements store.Store: in one read-write transaction it deletes
// the row only when token holds a live lease on it; a lapsed lease stays,
// for the attempt count.
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("spanner: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spanner: release: %w", err)
	}
	return s.transact(ctx, "release", func(ctx context.Context, t txn) error {
		now, stored, err := s.read(ctx, t.tx, key)
		live := liveRow(stored, now)
		if err != nil || live == nil || live.Status != statusInProgress || live.Token != string(token) {
			return err
		}
		return s.remove(ctx, t, key)
	})
}

// Renew implements store.Store: in one read-write transaction it reads the
// server's time and the row, and only when token holds a live lease on it
// moves the lease's end to that time plus lease, keeping the attempt and
// the fence. Anything else (no row, a lapsed lease, a completed record,
// another token's lease) writes nothing and is store.ErrLeaseLost. In
// InTx's context it runs in that transaction.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("spanner: renew: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spanner: renew: %w", err)
	}
	var lost bool
	err := s.transact(ctx, "renew", func(ctx context.Context, t txn) error {
		now, stored, err := s.read(ctx, t.tx, key)
		if err != nil {
			return err
		}
		live := liveRow(stored, now)
		lost = live == nil || live.Status != statusInProgress || live.Token != string(token)
		if lost {
			return nil
		}
		r := *live
		until := now.Add(lease)
		r.LockedUntil, r.ExpiresAt = sp.NullTime{Time: until, Valid: true}, until
		return s.put(ctx, t, key, true, r)
	})
	if err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("spanner: renew %q: %w", key, store.ErrLeaseLost)
	}
	return nil
}

// Get implements store.Store with one strong read (a single-use read-only
// transaction: it sees every transaction committed before it began, and
// takes no locks). In InTx's context it reads in that transaction.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("spanner: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("spanner: get: %w", err)
	}
	var q querier
	if tx, ok := s.ownTx(ctx); ok {
		q = tx
	} else {
		ro := s.client.Single()
		defer ro.Close()
		q = ro
	}
	now, stored, err := s.read(ctx, q, key)
	if err != nil {
		return store.Record{}, wrap(ctx, "get", err)
	}
	live := liveRow(stored, now)
	if live == nil {
		return store.Record{}, fmt.Errorf("spanner: get: %w", store.ErrNotFound)
	}
	return live.record(key), nil
}
