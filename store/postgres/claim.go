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
}

func (r *row) record(key string) store.Record {
	rec := store.Record{
		Key:         key,
		Fingerprint: r.fingerprint,
		Token:       store.Token(r.token),
		ExpiresAt:   r.expiresAt,
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

// Claim implements store.Store. A new key takes one round trip, and so does
// a key that is completed (a replay, which writes nothing), held by another
// token, or used with another fingerprint, while most recent claims of
// this Store inserted new keys. While most met existing rows (a wave of
// retries; see stats.found), Claim starts with a plain SELECT instead: a
// replay then costs exactly one SELECT, and a new key one more round trip.
// Either way a new key costs the server what a plain INSERT would, and a
// replay writes nothing. Taking over a lapsed lease or
// renewing the caller's own lease takes two; a row committed by a concurrent
// claim after this one's statement began costs one more read.
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
	for attempt := range maxClaimAttempts {
		// One variable for every scan destination: one allocation.
		var d struct {
			fp, tok        pgtype.Text
			status         pgtype.Int2
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
				Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt, &d.live)
			s.stats.claimed(err == nil)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
		} else {
			err = db.QueryRow(ctx, s.sql.claim, key, fingerprint, string(token), iv).
				Scan(&d.fp, &d.tok, &d.status, &r.response, &r.expiresAt, &d.inserted, &d.live)
			r.fingerprint, r.token, r.status = d.fp.String, d.tok.String, d.status.Int16
			if attempt == 0 && err == nil {
				s.stats.claimed(!d.inserted)
			}
			if errors.Is(err, pgx.ErrNoRows) {
				// The row was committed after the statement's snapshot: a
				// new statement sees it, unless it is gone again.
				s.stats.rereads.Add(1)
				err = db.QueryRow(ctx, s.sql.reread, key).
					Scan(&r.fingerprint, &r.token, &r.status, &r.response, &r.expiresAt, &d.live)
				if errors.Is(err, pgx.ErrNoRows) {
					continue
				}
			}
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("postgres: claim: %w", err)
		}
		if d.inserted {
			return acquired(key, fingerprint, token, r.expiresAt), nil
		}
		if !d.live {
			// Lapsed lease or retention over: the key is absent. Take the
			// row over if it is still the one just read.
			var until time.Time
			err := db.QueryRow(ctx, s.sql.takeover, key, fingerprint, string(token), iv, r.token).Scan(&until)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return store.Claim{}, fmt.Errorf("postgres: claim: take over: %w", err)
			}
			return acquired(key, fingerprint, token, until), nil
		}
		switch {
		case r.fingerprint != fingerprint:
			return store.Claim{Outcome: store.Mismatch, Record: r.record(key)}, nil
		case r.status == statusCompleted:
			return store.Claim{Outcome: store.Completed, Record: r.record(key)}, nil
		case r.token != string(token):
			return store.Claim{Outcome: store.InProgress, Record: r.record(key)}, nil
		}
		// Our own live lease: renew it.
		var until time.Time
		err = db.QueryRow(ctx, s.sql.renew, key, string(token), iv).Scan(&until)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // lapsed, completed or released meanwhile: look again
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("postgres: claim: renew: %w", err)
		}
		return acquired(key, fingerprint, token, until), nil
	}
	return store.Claim{}, fmt.Errorf("postgres: claim: the key's row changed under %d attempts in a row "+
		"(is the transaction REPEATABLE READ or stricter? claims need READ COMMITTED)", maxClaimAttempts)
}

func acquired(key, fingerprint string, token store.Token, until time.Time) store.Claim {
	return store.Claim{Outcome: store.Acquired, Record: store.Record{
		Key:         key,
		Fingerprint: fingerprint,
		Status:      store.StatusInProgress,
		Token:       token,
		LockedUntil: until,
		ExpiresAt:   until,
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
