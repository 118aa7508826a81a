package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemkit/idemkit/store"
)

// maxClaimAttempts bounds Claim's loop. Each further attempt needs the key's
// row to change under it again (released, purged, taken over), so a claim
// that runs out of attempts means something keeps rewriting the key, or the
// transaction runs at an isolation level where a new statement does not see
// newly committed rows.
const maxClaimAttempts = 16

// row is one record as read from the table.
type row struct {
	fingerprint string
	token       string
	status      int16
	response    []byte
	expiresAt   time.Time
	attempt     int32 // 1 for a row written before the attempt column (its default)
	fence       int64 // 0 for a row written before the fence column (its default)
}

func (r *row) record(key string) store.Record {
	rec := store.Record{
		Key:         key,
		Fingerprint: r.fingerprint,
		Token:       store.Token(r.token),
		ExpiresAt:   r.expiresAt,
		Attempt:     uint32(r.attempt),
		Fence:       uint64(r.fence),
	}
	if r.status == statusCompleted {
		rec.Status = store.StatusCompleted
		rec.Response = r.response
	} else {
		rec.Status = store.StatusInProgress
		rec.LockedUntil = r.expiresAt
	}
	return rec
}

// Claim implements store.Store. Its first statement is the one the
// Store's recent claims call for (see stats.found): while most inserted new
// keys, a plain INSERT … ON CONFLICT DO NOTHING, so a new key costs exactly
// that statement and one round trip, and a key that exists one SELECT more;
// while most met existing rows (a wave of retries), a plain SELECT, so a
// replay, a key held by another token or a mismatch costs exactly that
// statement and one round trip, and a new key the INSERT more. A replay
// never writes. Taking over a lapsed lease or renewing the caller's own
// lease adds a token-checked UPDATE. The statement that acquires the key
// also sets the record's Attempt and Fence, as store.Successor computes
// them from the row it replaces, on the server's clock. With coalescing (WithCoalescing), the
// INSERT of concurrent claims is sent as one statement.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("postgres: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("postgres: claim: %w", err)
	}
	db := s.conn(ctx)
	iv := interval(lease)
	readFirst := s.stats.readFirst()
	batched := s.coalescing(ctx)
	for attempt := range maxClaimAttempts {
		// One variable for every scan destination: one allocation.
		var d struct {
			r              row
			inserted, live bool
		}
		r := &d.r
		var err error
		if readFirst && attempt == 0 {
			// Most recent claims met an existing row: a plain SELECT
			// first, which is all a replay needs; an absent key goes on
			// to the insert (one more round trip, for the rarer case).
			err = db.QueryRow(ctx, s.sql.reread, key).
				Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt, &d.live, &r.attempt, &r.fence)
			s.stats.claimed(err == nil)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
		} else {
			// Most recent claims inserted: a plain INSERT … DO NOTHING,
			// which is all a new key needs; a key that exists (or was
			// committed meanwhile by a concurrent claim, which DO NOTHING
			// waits for) is read by a second statement, which sees it.
			if batched {
				// The same INSERT, alone or in one statement with
				// concurrent claims' (see WithCoalescing).
				var ins inserted
				ins, err = s.batch.claim(ctx, claimReq{key: key, fingerprint: fingerprint, token: string(token), lease: iv})
				if err == nil && !ins.ok {
					err = pgx.ErrNoRows
				}
				r.expiresAt, r.fence = ins.until, ins.fence
			} else {
				err = db.QueryRow(ctx, s.sql.claim, key, fingerprint, string(token), iv).Scan(&r.expiresAt, &r.fence)
			}
			d.inserted = err == nil
			if attempt == 0 && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
				s.stats.claimed(!d.inserted)
			}
			if errors.Is(err, pgx.ErrNoRows) {
				s.stats.rereads.Add(1)
				err = db.QueryRow(ctx, s.sql.reread, key).
					Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt, &d.live, &r.attempt, &r.fence)
				if errors.Is(err, pgx.ErrNoRows) {
					continue // gone again (released, purged): insert again
				}
			}
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("postgres: claim: %w", err)
		}
		if d.inserted {
			return acquired(key, fingerprint, token, r.expiresAt, 1, r.fence), nil
		}
		if !d.live {
			// Lapsed lease or retention over: the key is absent. Take the
			// row over if it is still the one just read.
			err := db.QueryRow(ctx, s.sql.takeover, key, fingerprint, string(token), iv, r.token).
				Scan(&r.expiresAt, &r.attempt, &r.fence)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return store.Claim{}, fmt.Errorf("postgres: claim: take over: %w", err)
			}
			return acquired(key, fingerprint, token, r.expiresAt, r.attempt, r.fence), nil
		}
		// The server found the row live (on its clock): no now to compare.
		rec := r.record(key)
		if f := store.Classify(rec, fingerprint, token, time.Time{}); !f.Write {
			return store.Claim{Outcome: f.Outcome, Record: rec}, nil
		}
		// Our own live lease: renew it, keeping its attempt and fence.
		err = db.QueryRow(ctx, s.sql.renew, key, string(token), iv).Scan(&r.expiresAt, &r.attempt, &r.fence)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // lapsed, completed or released meanwhile: look again
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("postgres: claim: renew: %w", err)
		}
		return acquired(key, fingerprint, token, r.expiresAt, r.attempt, r.fence), nil
	}
	return store.Claim{}, fmt.Errorf("postgres: claim: the key's row changed under %d attempts in a row "+
		"(is the transaction REPEATABLE READ or stricter? claims need READ COMMITTED)", maxClaimAttempts)
}

func acquired(key, fingerprint string, token store.Token, until time.Time, attempt int32, fence int64) store.Claim {
	return store.Claim{Outcome: store.Acquired, Record: store.Record{
		Key:         key,
		Fingerprint: fingerprint,
		Status:      store.StatusInProgress,
		Token:       token,
		LockedUntil: until,
		ExpiresAt:   until,
		Attempt:     uint32(attempt),
		Fence:       uint64(fence),
	}}
}

// interval converts d to a PostgreSQL interval of whole microseconds (the
// server's resolution), rounding up so that a positive duration never
// becomes zero.
func interval(d time.Duration) pgtype.Interval {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return pgtype.Interval{Microseconds: us, Valid: true}
}
