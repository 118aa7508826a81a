package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// maxRounds bounds the read-and-compare-and-set rounds of one call. Each
// lost round means another writer changed the key in between; so many in a
// row mean something is wrong.
const maxRounds = 64

var errContended = errors.New("the key changed under every attempt")

// found is a key's latest message, decoded.
type found struct {
	seq    uint64 // 0: the subject has no message
	absent bool   // no record: no message, a marker, or a record past its deadline
	rec    record
	stamp  time.Time
	now    time.Time // the servers' time bound absent was decided at (zero without a record)
}

// read returns the state of subj as the stream leader has it.
func (s *Store) read(ctx context.Context, subj string) (found, error) {
	m, err := s.load(ctx, subj)
	if err != nil || m == nil {
		return found{absent: true}, err
	}
	f := found{seq: m.Seq, stamp: m.Time}
	if m.marker() {
		f.absent = true
		return f, nil
	}
	f.rec, err = decodeRecord(m.Data, m.header.Get(lifeHeader))
	if err != nil {
		return f, fmt.Errorf("entry %s (revision %d): %w", subj, m.Seq, err)
	}
	if f.now, err = s.clock.now(ctx); err != nil {
		return f, err
	}
	f.absent = !f.now.Before(f.stamp.Add(f.rec.life))
	return f, nil
}

// stored reports whether f holds a record (live or not), not a marker or
// nothing.
func (f found) stored() bool { return f.rec.status != 0 }

// Claim takes key for token as the package documentation describes: a
// compare-and-set write on the key's entry, which creates it (expecting no
// message), renews it (expecting the revision read, by the same token), or
// takes over a lapsed lease or an expired record (expecting the revision
// read).
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("nats: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("nats: claim: %w", err)
	}
	c, err := s.claim(ctx, key, fingerprint, token, lease)
	if err != nil {
		return store.Claim{}, fmt.Errorf("nats: claim: %w", err)
	}
	return c, nil
}

func (s *Store) claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return store.Claim{}, err
	}
	subj := s.prefix + keyToken(key)
	// The first round assumes a new key and writes at once.
	f := found{absent: true}
	for range maxRounds {
		if !f.absent {
			r := f.rec
			switch {
			case r.fingerprint != fingerprint:
				return store.Claim{Outcome: store.Mismatch, Record: r.toRecord(key, f.stamp)}, nil
			case r.status == store.StatusCompleted:
				return store.Claim{Outcome: store.Completed, Record: r.toRecord(key, f.stamp)}, nil
			case r.token != token:
				return store.Claim{Outcome: store.InProgress, Record: r.toRecord(key, f.stamp)}, nil
			}
			// In progress by token: renew below.
		}
		// The new record's time stamp is at least the bound now, so this
		// deadline is at or before the one every other reader computes.
		before, _, ok := s.clock.bound()
		if !ok {
			if before, err = s.clock.now(ctx); err != nil {
				return store.Claim{}, err
			}
		}
		// The attempt and the fence follow the record this write replaces
		// (the one read, at the revision the write expects), decided at the
		// instant the read decided it was absent or the caller's own.
		at := f.now
		if !f.stored() {
			at = before
		}
		attempt, fence := store.Successor(f.rec.toRecord(key, f.stamp), f.stored(), token, at)
		rec := record{status: store.StatusInProgress, fingerprint: fingerprint, token: token, life: lease, attempt: attempt, fence: fence}
		_, conflict, err := s.write(ctx, bi, subj, f.seq, &rec, "")
		if err != nil {
			return store.Claim{}, err
		}
		if !conflict {
			return store.Claim{Outcome: store.Acquired, Record: rec.toRecord(key, before)}, nil
		}
		if f, err = s.read(ctx, subj); err != nil {
			return store.Claim{}, err
		}
	}
	return store.Claim{}, errContended
}

// Complete stores response for key if token holds it: a compare-and-set
// write over the revision it read, so a token that lost the key can never
// overwrite the next holder's record.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("nats: complete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: complete: %w", err)
	}
	if err := s.complete(ctx, key, token, response, retention); err != nil {
		return fmt.Errorf("nats: complete: %w", err)
	}
	return nil
}

func (s *Store) complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return err
	}
	subj := s.prefix + keyToken(key)
	for range maxRounds {
		f, err := s.read(ctx, subj)
		if err != nil {
			return err
		}
		// A lapsed lease whose record is still there may complete: no one
		// has taken it over, and the write checks that no one does first.
		lapsedOwn := f.seq != 0 && f.absent && f.rec.status == store.StatusInProgress
		switch {
		case f.absent && !lapsedOwn, f.rec.token != token:
			return store.ErrLeaseLost
		case f.rec.status == store.StatusCompleted:
			return nil // a retried Complete: the first response stays
		}
		if limit := s.maxResponse(bi, f.rec.fingerprint, token); len(response) > limit {
			return fmt.Errorf("%w: a response of %d bytes is larger than bucket %s keeps (%d bytes: its max value size or the servers' max_payload, less the record's own bytes)",
				store.ErrInvalid, len(response), s.bucket, limit)
		}
		// The completed record keeps the lease's attempt and fence.
		done := f.rec
		done.status, done.response, done.life = store.StatusCompleted, response, retention
		_, conflict, err := s.write(ctx, bi, subj, f.seq, &done, "")
		if err != nil || !conflict {
			return err
		}
	}
	return errContended
}

// Release deletes key's record if token holds it, with a delete marker
// written only over the revision it read.
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("nats: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: release: %w", err)
	}
	if err := s.release(ctx, key, token); err != nil {
		return fmt.Errorf("nats: release: %w", err)
	}
	return nil
}

func (s *Store) release(ctx context.Context, key string, token store.Token) error {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return err
	}
	subj := s.prefix + keyToken(key)
	for range maxRounds {
		f, err := s.read(ctx, subj)
		if err != nil {
			return err
		}
		if f.absent || f.rec.token != token || f.rec.status != store.StatusInProgress {
			return nil // absent, lapsed, or not token's lease: nothing changes
		}
		_, conflict, err := s.write(ctx, bi, subj, f.seq, nil, "DEL")
		if err != nil || !conflict {
			return err
		}
	}
	return errContended
}

// Renew extends token's live lease on key to lease from now: a
// compare-and-set write of the same record (same attempt and fence) with
// the new lease, over the revision in which the read found token's live
// lease. When the read finds anything else (no record, a marker left by
// Release, a lapsed lease, a completed record, another token's lease) it
// returns store.ErrLeaseLost and writes nothing; when the write finds the
// revision changed it reads again, so a renewal racing a Release, a
// Complete or a takeover never writes over it.
//
// A lease is live to Renew as to Claim: until the servers' time, as the
// Store's bound of it reads, reaches its deadline. The bound lags by about
// a round trip, so a lease may be renewed up to a round trip after its
// deadline, but only while no other writer has changed the key.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("nats: renew: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: renew: %w", err)
	}
	if err := s.renew(ctx, key, token, lease); err != nil {
		return fmt.Errorf("nats: renew %q: %w", key, err)
	}
	return nil
}

func (s *Store) renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	bi, err := s.bucketInfo(ctx)
	if err != nil {
		return err
	}
	subj := s.prefix + keyToken(key)
	for range maxRounds {
		f, err := s.read(ctx, subj)
		if err != nil {
			return err
		}
		if f.absent || f.rec.status != store.StatusInProgress || f.rec.token != token {
			return store.ErrLeaseLost
		}
		r := f.rec
		r.life = lease
		_, conflict, err := s.write(ctx, bi, subj, f.seq, &r, "")
		if err != nil || !conflict {
			return err
		}
	}
	return errContended
}

// Get returns key's live record, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("nats: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("nats: get: %w", err)
	}
	if _, err := s.bucketInfo(ctx); err != nil {
		return store.Record{}, fmt.Errorf("nats: get: %w", err)
	}
	f, err := s.read(ctx, s.prefix+keyToken(key))
	if err != nil {
		return store.Record{}, fmt.Errorf("nats: get: %w", err)
	}
	if f.absent {
		return store.Record{}, store.ErrNotFound
	}
	return f.rec.toRecord(key, f.stamp), nil
}
