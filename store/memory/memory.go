// Package memory is an in-process idemkit store: fast, safe for concurrent
// use, and gone when the process exits. Use it in tests, in single-instance
// services, and wherever losing the keys on restart is acceptable.
//
// Records live in 256 maps (shards), each behind its own mutex, so goroutines
// working on different keys rarely wait for each other. A record whose lease
// lapsed or whose retention is over is treated as absent at once; its memory
// is reclaimed by the next write to the same key, by Purge, or by the
// background sweep that New starts (every minute by default, see
// WithSweepInterval), so a long-running process holds only live records plus
// at most one sweep interval's worth of expired ones, and the lapsed leases
// of the last store.LapsedKept (kept so that a takeover counts its attempt).
// Call Close to stop the sweep.
package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/store"
)

const (
	shardBits = 8
	numShards = 1 << shardBits
)

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	shards [numShards]shard
	now    func() time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type shard struct {
	mu sync.Mutex
	m  map[string]entry
	_  [48]byte // one shard per 64-byte cache line (TestShardSize): no false sharing between shards
}

// entry is one record. expiresAt is in Unix nanoseconds of the store's
// clock; it is also the end of the lease of a record in progress, which has
// no other deadline (store.Record.LockedUntil equals ExpiresAt there).
type entry struct {
	fingerprint string
	token       store.Token
	response    []byte
	expiresAt   int64
	fence       uint64
	attempt     uint32
	status      store.Status
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Purger = (*Store)(nil)
)

// Option configures a Store. An option returns an error for a value it
// cannot use; New reports it (matching store.ErrInvalid) and builds nothing.
type Option func(*options) error

type options struct {
	now   func() time.Time
	sweep time.Duration
}

// WithClock makes the store read the time from now instead of time.Now,
// so tests can move time forward without sleeping. A nil now is an error
// at New.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("WithClock(nil): pass a clock such as time.Now")
		}
		o.now = now
		return nil
	}
}

// WithSweepInterval sets how often the background sweep deletes expired
// records (default one minute). Zero starts no sweep; expired records are
// then reclaimed only by writes to their key and by Purge. A negative
// interval is an error at New.
func WithSweepInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("WithSweepInterval(%v): pass a positive interval, or 0 for no sweep", d)
		}
		o.sweep = d
		return nil
	}
}

// New returns an empty Store and starts its background sweep.
// Call Close when done with it to stop the sweep. New fails only for an
// invalid option (a nil option, a nil clock, a negative sweep interval),
// with an error that matches store.ErrInvalid.
func New(opts ...Option) (*Store, error) {
	o := options{now: time.Now, sweep: time.Minute}
	if err := invalid.Apply(&o, opts); err != nil {
		return nil, fmt.Errorf("memory: new: %w", err)
	}
	s := &Store{now: o.now}
	for i := range s.shards {
		s.shards[i].m = make(map[string]entry)
	}
	if o.sweep > 0 {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
		go s.sweepEvery(o.sweep)
	}
	return s, nil
}

// Close stops the background sweep and waits for it to finish. The store
// stays usable afterwards, without the sweep. Close is safe to call more than
// once and always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// Claim implements store.Store.
//
// Each call reads the clock once, before it takes the shard's lock: the
// call then acts as of that instant (a record that lapses while the call
// waits for the lock is still live to it, and a lease it grants ends a
// lease after that instant), which only ever errs towards keeping a
// record live, and keeps the clock out of the lock that other callers of
// the shard wait for. Who acquires is decided under the lock, by the check
// and the write together.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	h, ok := claimOK(key, fingerprint, token, lease)
	if !ok {
		if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
			return store.Claim{}, fmt.Errorf("memory: claim: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("memory: claim: %w", err)
	}
	now := s.now().UnixNano()
	sh := s.shard(h)
	sh.mu.Lock()
	e, ok := sh.m[key]
	if ok && e.expiresAt > now && e.fingerprint == fingerprint {
		// A live record of this fingerprint (a mismatch, which the
		// contract reports before anything else, goes on to shard.claim):
		// store.Classify's third and fifth cases are decided here, by one
		// status and one token comparison under the lock, and their record
		// is built after the unlock. e is a copy and its response is never
		// written after Complete stored it, so the one copy of the response
		// needs no lock either. Both records are built in the returned
		// Claim itself, not by entry.completed and entry.inProgress (a
		// call that fills a Record and has it copied into the Claim):
		// TestClaimRecordLiterals keeps the two literals in step with them.
		switch {
		case e.status == store.StatusCompleted: // a replay
			sh.mu.Unlock()
			return store.Claim{Outcome: store.Completed, Record: store.Record{
				Key: key, Fingerprint: e.fingerprint, Status: e.status, Token: e.token, Response: cloneBytes(e.response),
				ExpiresAt: time.Unix(0, e.expiresAt), Attempt: e.attempt, Fence: e.fence,
			}}, nil
		case e.token != token: // another token's live lease
			sh.mu.Unlock()
			t := time.Unix(0, e.expiresAt)
			return store.Claim{Outcome: store.InProgress, Record: store.Record{
				Key: key, Fingerprint: e.fingerprint, Status: e.status, Token: e.token,
				LockedUntil: t, ExpiresAt: t, Attempt: e.attempt, Fence: e.fence,
			}}, nil
		}
	}
	o := sh.claim(&e, ok, key, fingerprint, token, lease, now)
	sh.mu.Unlock()
	return store.Claim{Outcome: o, Record: e.record(key)}, nil
}

// claim is Store.Claim for the cases its fast path leaves (an absent or
// lapsed key, a mismatch, the caller's own lease), with sh.mu held: e is
// the stored entry (if ok), which it renews or replaces as
// store.Classify and store.Successor decide, leaving in e the record the
// claim returns. e is a copy, and a response is never written after
// Complete stored it, so the caller builds the record unlocked.
func (sh *shard) claim(e *entry, ok bool, key, fingerprint string, token store.Token, lease time.Duration, now int64) store.Outcome {
	f := store.Finding{Outcome: store.Acquired, Write: true, Lapsed: true} // absent: as if never claimed
	// prev is the stored record, as Classify and Successor read it.
	var prev store.Record
	if ok {
		prev = store.Record{Fingerprint: e.fingerprint, Status: e.status, Token: e.token, ExpiresAt: time.Unix(0, e.expiresAt), Attempt: e.attempt, Fence: e.fence}
		f = store.Classify(prev, fingerprint, token, time.Unix(0, now))
	}
	switch {
	case f.Lapsed:
		// The attempt and fence follow the record this claim replaces, if any.
		attempt, fence := store.Successor(prev, ok, token, time.Unix(0, now))
		*e = entry{fingerprint: fingerprint, token: token, expiresAt: addNanos(now, lease), status: store.StatusInProgress, attempt: attempt, fence: fence}
		sh.m[key] = *e
	case f.Write: // in progress by this token: renew the lease
		e.expiresAt = addNanos(now, lease)
		sh.m[key] = *e
	}
	return f.Outcome
}

// Complete implements store.Store. Like Claim, it reads the clock once,
// before it takes the shard's lock.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	h, ok := completeOK(key, token, retention)
	if !ok {
		if err := store.CheckComplete(key, token, retention); err != nil {
			return fmt.Errorf("memory: complete: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: complete: %w", err)
	}
	// Copied before taking the lock; never written again once stored, so
	// readers may copy it out after unlocking.
	resp := cloneBytes(response)
	now := s.clock()
	sh := s.shard(h)
	sh.mu.Lock()
	e, live := sh.get(key, now)
	if !live || e.token != token {
		sh.mu.Unlock()
		return fmt.Errorf("memory: complete %q: %w", key, store.ErrLeaseLost)
	}
	if e.status == store.StatusCompleted {
		sh.mu.Unlock()
		return nil // a retried Complete: the first response and retention stay
	}
	e.status = store.StatusCompleted
	e.response = resp
	e.expiresAt = addNanos(now, retention)
	sh.m[key] = e
	sh.mu.Unlock()
	return nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	h, ok := releaseOK(key, token)
	if !ok {
		if err := store.CheckRelease(key, token); err != nil {
			return fmt.Errorf("memory: release: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: release: %w", err)
	}
	now := s.clock()
	sh := s.shard(h)
	sh.mu.Lock()
	if e, live := sh.get(key, now); live && e.status == store.StatusInProgress && e.token == token {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	return nil
}

// Renew implements store.Renewer: it extends a live lease that token holds,
// and otherwise returns store.ErrLeaseLost and changes nothing.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("memory: renew: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: renew: %w", err)
	}
	h, _ := keyOK(key)
	now := s.clock()
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, live := sh.get(key, now)
	if !live || e.status != store.StatusInProgress || e.token != token {
		return fmt.Errorf("memory: renew %q: %w", key, store.ErrLeaseLost)
	}
	e.expiresAt = addNanos(now, lease)
	sh.m[key] = e
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	h, ok := keyOK(key)
	if !ok {
		if err := store.CheckKey(key); err != nil {
			return store.Record{}, fmt.Errorf("memory: get: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("memory: get: %w", err)
	}
	now := s.clock()
	sh := s.shard(h)
	sh.mu.Lock()
	e, live := sh.get(key, now)
	sh.mu.Unlock()
	if !live {
		return store.Record{}, fmt.Errorf("memory: get %q: %w", key, store.ErrNotFound)
	}
	return e.record(key), nil
}

// Purge deletes every record whose retention is over, or whose lease
// lapsed more than store.LapsedKept ago, one shard at a time, and reports
// how many it deleted. It implements store.Purger.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	var n int64
	for i := range s.shards {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("memory: purge: %w", err)
		}
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.clock()
		lapsedBefore := now - int64(store.LapsedKept)
		for k, e := range sh.m {
			if e.expiresAt <= now && (e.status != store.StatusInProgress || e.expiresAt <= lapsedBefore) {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n, nil
}

// Len reports how many records the store holds, including expired ones not
// yet reclaimed. It is meant for tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (s *Store) sweepEvery(d time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			_, _ = s.Purge(context.Background())
		}
	}
}

func (s *Store) clock() int64 { return s.now().UnixNano() }

// shard returns the shard of the key whose hash (from scan) is h.
func (s *Store) shard(h uint64) *shard {
	return &s.shards[h>>(64-shardBits)]
}

// get returns the key's entry and whether it is live at now. The caller holds sh.mu.
func (sh *shard) get(key string, now int64) (entry, bool) {
	e, ok := sh.m[key]
	return e, ok && e.expiresAt > now
}

// record returns the caller's copy of e: entry.completed or entry.inProgress.
func (e *entry) record(key string) store.Record {
	if e.status == store.StatusCompleted {
		return e.completed(key)
	}
	return e.inProgress(key)
}

// completed returns the caller's copy of the completed record e, with its
// own copy of the response (the one allocation of a replay).
func (e *entry) completed(key string) store.Record {
	return store.Record{Key: key, Fingerprint: e.fingerprint, Status: e.status, Token: e.token,
		Response: cloneBytes(e.response), ExpiresAt: time.Unix(0, e.expiresAt), Attempt: e.attempt, Fence: e.fence}
}

// inProgress returns the caller's copy of the in-progress record e, whose
// LockedUntil is the same instant as its ExpiresAt.
func (e *entry) inProgress(key string) store.Record {
	t := time.Unix(0, e.expiresAt)
	return store.Record{Key: key, Fingerprint: e.fingerprint, Status: e.status, Token: e.token,
		LockedUntil: t, ExpiresAt: t, Attempt: e.attempt, Fence: e.fence}
}

// cloneBytes returns a copy of b, nil for nil and empty for empty, as
// bytes.Clone does, with make and copy: the compiler turns the pair into
// one allocation that is not zeroed first (runtime.makeslicecopy), where
// bytes.Clone's append grows a slice (runtime.growslice, which rounds the
// capacity up to a size class and zeroes the tail).
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// addNanos returns now+d in Unix nanoseconds, saturating instead of overflowing.
func addNanos(now int64, d time.Duration) int64 {
	if now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}
