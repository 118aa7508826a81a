package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Defaults of New.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 64 << 20 // 64 MiB
	DefaultMargin     = time.Second
)

// entryOverhead is what one entry costs besides its strings and response,
// counted against WithMaxBytes: the entry itself, its map slot, its list
// links.
const entryOverhead = 160

// maxShards is how many shards a cache with room enough has.
const maxShards = 64

// Option configures New.
type Option func(*options) error

type options struct {
	maxEntries int
	maxBytes   int64
	margin     time.Duration
	now        func() time.Time
}

// WithMaxEntries bounds how many records the cache holds (n > 0; default
// DefaultMaxEntries). When it is full, the least recently used record leaves.
func WithMaxEntries(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("max entries %d is not positive", n)
		}
		o.maxEntries = n
		return nil
	}
}

// WithMaxBytes bounds the memory the cached records take, in bytes: keys,
// fingerprints, tokens and responses, plus a fixed overhead per record (n >
// 0; default DefaultMaxBytes). A record too large for its shard's share is
// not cached at all; it is answered by the store every time.
func WithMaxBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("max bytes %d is not positive", n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithMargin sets how long before its record's ExpiresAt a cached record
// stops being served (d >= 0; default DefaultMargin). The margin covers the
// skew between this process's clock and the clock of the store's server,
// which computed ExpiresAt: a record is never served after the store would
// have expired it as long as the skew is below the margin. Use 0 only when
// the cache and the store read the same clock (the memory store, or tests).
func WithMargin(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("margin %v is negative", d)
		}
		o.margin = d
		return nil
	}
}

// WithClock sets the clock the cache compares ExpiresAt with (default
// time.Now). Give it the clock the wrapped store reads.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("nil clock: pass time.Now or a test clock")
		}
		o.now = now
		return nil
	}
}

// Store is what New returns: a store.Store that answers replays of cached
// completed records from memory, with the cache's own methods. Its dynamic
// type implements store.Transactor exactly when the wrapped store does, and
// store.Purger exactly when the wrapped store does; Migrate and Close
// always exist and call the wrapped store's when it has them (as
// store.Migrate and store.Close do).
type Store interface {
	store.Store
	store.Migrator
	io.Closer
	// Stats returns the cache's counters.
	Stats() Stats
	// Invalidate drops key's cached record, if any, so the next Claim or
	// Get of key asks the store. Call it after deleting a record behind
	// the cache's back (a manual delete, a Purge through another process).
	Invalidate(key string)
	// InvalidateAll drops every cached record.
	InvalidateAll()
	// Unwrap returns the wrapped store.
	Unwrap() store.Store
}

// Stats are the cache's counters since New. Hits and Misses count Claims
// and Gets: a hit was answered from memory, a miss went to the store (a
// Claim of a key that is not cached, or cached with another fingerprint).
type Stats struct {
	Hits      int64 // answered from memory
	Misses    int64 // asked the store
	Fills     int64 // completed records the store returned and the cache kept
	Evictions int64 // records dropped to stay within the bounds
	Expired   int64 // records dropped because their retention (less the margin) was over
	Entries   int64 // records held now
	Bytes     int64 // bytes held now, as WithMaxBytes counts them
}

// New returns a cache in front of inner. It reports an error matching
// store.ErrInvalid for a nil inner store, a nil option or an invalid value.
func New(inner store.Store, opts ...Option) (Store, error) {
	if inner == nil {
		return nil, fmt.Errorf("cache: new: %w: nil store", store.ErrInvalid)
	}
	o := options{maxEntries: DefaultMaxEntries, maxBytes: DefaultMaxBytes, margin: DefaultMargin, now: time.Now}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("cache: new: %w: option %d is nil", store.ErrInvalid, i)
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("cache: new: %w: %w", store.ErrInvalid, err)
		}
	}
	n := maxShards
	for n > 1 && (o.maxEntries/n < 16 || o.maxBytes/int64(n) < 1<<20) {
		n /= 2
	}
	c := &cached{inner: inner, opts: o, seed: maphash.MakeSeed(), shards: make([]shard, n)}
	for i := range c.shards {
		c.shards[i].init(o.maxEntries/n, o.maxBytes/int64(n))
	}
	return withCapabilities(c), nil
}

// cached is the Store without the optional interfaces of the inner store;
// withCapabilities adds those.
type cached struct {
	inner  store.Store
	opts   options
	seed   maphash.Seed
	shards []shard
}

func (c *cached) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// Claim implements store.Store. A key cached as completed with the same
// fingerprint is answered Completed from memory; every other Claim goes to
// the wrapped store, and a Completed answer from it is cached.
func (c *cached) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("cache: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("cache: claim: %w", err)
	}
	sh := c.shard(key)
	if r, ok := sh.lookup(key, fingerprint, true, c.deadline()); ok {
		return store.Claim{Outcome: store.Completed, Record: r}, nil
	}
	cl, err := c.inner.Claim(ctx, key, fingerprint, token, lease)
	if err == nil && cl.Outcome == store.Completed {
		sh.fill(key, cl.Record, c.deadline())
	}
	return cl, err
}

// Complete implements store.Store. It goes to the wrapped store and caches
// nothing: a retried Complete keeps the first response, which the caller
// of this one may not know, so only a completed record the store returns
// is ever cached.
func (c *cached) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	return c.inner.Complete(ctx, key, token, response, retention)
}

// Release implements store.Store. It goes to the wrapped store; it never
// affects a completed record, so it never affects the cache.
func (c *cached) Release(ctx context.Context, key string, token store.Token) error {
	return c.inner.Release(ctx, key, token)
}

// Renew implements store.Store: the wrapped store's Renew. The cache holds
// no in-progress record, so it has nothing to renew or drop.
func (c *cached) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return c.inner.Renew(ctx, key, token, lease)
}

// Get implements store.Store. A cached completed record is answered from
// memory; otherwise the wrapped store answers and a completed record it
// returns is cached.
func (c *cached) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("cache: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, fmt.Errorf("cache: get: %w", err)
	}
	sh := c.shard(key)
	if r, ok := sh.lookup(key, "", false, c.deadline()); ok {
		return r, nil
	}
	r, err := c.inner.Get(ctx, key)
	if err == nil && r.Status == store.StatusCompleted {
		sh.fill(key, r, c.deadline())
	}
	return r, err
}

// deadline returns the earliest ExpiresAt a cached record may have and
// still be served now.
func (c *cached) deadline() time.Time { return c.opts.now().Add(c.opts.margin) }

// Migrate runs the wrapped store's Migrate, if it has one.
func (c *cached) Migrate(ctx context.Context) error { return store.Migrate(ctx, c.inner) }

// Close drops every cached record and closes the wrapped store, if it has
// a Close: a cache made around a store opened from a URL closes it once.
func (c *cached) Close() error {
	c.InvalidateAll()
	return store.Close(c.inner)
}

// Unwrap returns the wrapped store.
func (c *cached) Unwrap() store.Store { return c.inner }

// Invalidate drops key's cached record, if any.
func (c *cached) Invalidate(key string) { c.shard(key).remove(key) }

// InvalidateAll drops every cached record.
func (c *cached) InvalidateAll() {
	for i := range c.shards {
		c.shards[i].clear()
	}
}

// Stats returns the cache's counters.
func (c *cached) Stats() Stats {
	var s Stats
	for i := range c.shards {
		c.shards[i].addStats(&s)
	}
	return s
}

// recordSize is what a record costs against WithMaxBytes.
func recordSize(key string, r *store.Record) int64 {
	return int64(entryOverhead + 2*len(key) + len(r.Fingerprint) + len(r.Token) + len(r.Response))
}

// cloneRecord returns r with a response of its own.
func cloneRecord(r store.Record) store.Record {
	r.Response = bytes.Clone(r.Response)
	return r
}
