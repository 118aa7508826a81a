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
	now, err := s.clock.now(ctx)
	if err != nil {
		return f, err
	}
	f.absent = !now.Before(f.stamp.Add(f.rec.life))
	return f, nil
}

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
	data := encodeRecord(store.StatusInProgress, fingerprint, token, nil)
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
		_, conflict, err := s.write(ctx, bi, subj, f.seq, data, lease, "")
		if err != nil {
			return store.Claim{}, err
		}
		if !conflict {
			rec := record{status: store.StatusInProgress, fingerprint: fingerprint, token: token, life: lease}
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
	var data []byte
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
		if data == nil {
			if limit := s.maxResponse(bi, f.rec.fingerprint, token); len(response) > limit {
				return fmt.Errorf("%w: a response of %d bytes is larger than bucket %s keeps (%d bytes: its max value size or the servers' max_payload, less the record's own bytes)",
					store.ErrInvalid, len(response), s.bucket, limit)
			}
			data = encodeRecord(store.StatusCompleted, f.rec.fingerprint, token, response)
		}
		_, conflict, err := s.write(ctx, bi, subj, f.seq, data, retention, "")
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
		if f.seq == 0 || f.rec.token != token || f.rec.status != store.StatusInProgress {
			return nil // absent, or not token's: nothing changes
		}
		// The marker's life is only its TTL (where the servers have one).
		_, conflict, err := s.write(ctx, bi, subj, f.seq, nil, time.Second, "DEL")
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
