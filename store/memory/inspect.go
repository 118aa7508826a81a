package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// List implements store.Inspector. It visits the shards one at a time,
// holding each shard's lock only while it copies out the few fields an
// Entry needs of that shard's records, never two locks at once, and keeps
// only the page being built (store.PageScan): a page costs a pass over
// every record, in memory bounded by the page size plus a copy of one
// shard's record headers (1/256 of the store). Lapsed and expired
// records are listed until the sweep, Purge or a write to their key
// reclaims them.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	scan, err := store.NewPageScan(o)
	if err != nil {
		return store.Page{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.eachEntry(ctx, scan.Offer); err != nil {
		return store.Page{}, fmt.Errorf("memory: list: %w", err)
	}
	return scan.Page(), nil
}

// Count implements store.Inspector, with one pass as List makes.
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	if err := s.eachEntry(ctx, c.Add); err != nil {
		return store.Counts{}, fmt.Errorf("memory: count: %w", err)
	}
	return c, nil
}

// Lookup implements store.Inspector.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	h, ok := keyOK(key)
	if !ok {
		if err := store.CheckKey(key); err != nil {
			return store.Entry{}, fmt.Errorf("memory: lookup: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return store.Entry{}, fmt.Errorf("memory: lookup: %w", err)
	}
	now := s.clock()
	sh := s.shard(h)
	sh.mu.Lock()
	e, found := sh.m[key]
	sh.mu.Unlock()
	if !found {
		return store.Entry{}, fmt.Errorf("memory: lookup %q: %w", key, store.ErrNotFound)
	}
	return e.entry(key, now), nil
}

// eachEntry calls f with the entry of every record, shard by shard: under
// each shard's lock it only copies the records out (their strings and
// slices are shared, never written once stored), and it builds and offers
// the entries after releasing the lock, so a writer waits for a copy of one
// shard at most.
func (s *Store) eachEntry(ctx context.Context, f func(store.Entry)) error {
	type kv struct {
		key string
		e   entry
	}
	var buf []kv
	for i := range s.shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		sh := &s.shards[i]
		buf = buf[:0]
		now := s.clock()
		sh.mu.Lock()
		for k, e := range sh.m {
			buf = append(buf, kv{k, e})
		}
		sh.mu.Unlock()
		for i := range buf {
			f(buf[i].e.entry(buf[i].key, now))
		}
	}
	return nil
}

// entry returns what an Inspector shows of e, at now.
func (e *entry) entry(key string, now int64) store.Entry {
	x := store.Entry{
		Key:             key,
		State:           store.StateOf(e.status, e.expiresAt <= now),
		TokenHash:       store.HashToken(e.token),
		FingerprintSize: len(e.fingerprint),
		ResponseSize:    len(e.response),
		ExpiresAt:       time.Unix(0, e.expiresAt),
		Attempt:         e.attempt,
		Fence:           e.fence,
	}
	if e.status == store.StatusInProgress {
		x.LockedUntil = x.ExpiresAt
	}
	return x
}
