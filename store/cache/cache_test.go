package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/cache"
	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

// counting passes every call to its store and counts Claims and Gets, to
// tell which calls the cache answered itself. Its store can be swapped, to
// stand for records deleted behind the cache's back.
type counting struct {
	mu     sync.Mutex
	s      store.Store
	claims atomic.Int64
	gets   atomic.Int64
}

func (c *counting) inner() store.Store { c.mu.Lock(); defer c.mu.Unlock(); return c.s }
func (c *counting) swap(s store.Store) { c.mu.Lock(); defer c.mu.Unlock(); c.s = s }

func (c *counting) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	c.claims.Add(1)
	return c.inner().Claim(ctx, key, fp, tok, lease)
}

func (c *counting) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	return c.inner().Complete(ctx, key, tok, resp, retention)
}

func (c *counting) Release(ctx context.Context, key string, tok store.Token) error {
	return c.inner().Release(ctx, key, tok)
}

func (c *counting) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	return c.inner().Renew(ctx, key, tok, lease)
}

func (c *counting) Get(ctx context.Context, key string) (store.Record, error) {
	c.gets.Add(1)
	return c.inner().Get(ctx, key)
}

// fixture is a cache over a counting memory store on a manual clock.
type fixture struct {
	t     *testing.T
	clock *storetest.ManualClock
	inner *counting
	c     cache.Store
}

func newFixture(t *testing.T, opts ...cache.Option) *fixture {
	t.Helper()
	clock := storetest.NewManualClock(start)
	inner := &counting{s: newMemory(t, clock.Now)}
	opts = append([]cache.Option{cache.WithClock(clock.Now), cache.WithMargin(0)}, opts...)
	return &fixture{t: t, clock: clock, inner: inner, c: mustCache(t, inner, opts...)}
}

// complete claims and completes key with fingerprint "fp" and resp, kept
// for retention, and returns the completing token.
func (f *fixture) complete(key string, resp []byte, retention time.Duration) store.Token {
	f.t.Helper()
	tok := store.NewToken()
	if c, err := f.c.Claim(f.t.Context(), key, "fp", tok, time.Minute); err != nil || c.Outcome != store.Acquired {
		f.t.Fatalf("Claim(%q) = %v, %v; want acquired", key, c.Outcome, err)
	}
	if err := f.c.Complete(f.t.Context(), key, tok, resp, retention); err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// claim claims key with fp and a new token and returns what the cache said
// and whether the store was asked.
func (f *fixture) claim(key, fp string) (store.Claim, bool) {
	f.t.Helper()
	before := f.inner.claims.Load()
	c, err := f.c.Claim(f.t.Context(), key, fp, store.NewToken(), time.Minute)
	if err != nil {
		f.t.Fatalf("Claim(%q): %v", key, err)
	}
	return c, f.inner.claims.Load() != before
}

func TestReplayAnsweredFromMemory(t *testing.T) {
	f := newFixture(t)
	tok := f.complete("k", []byte("resp"), time.Hour)
	if f.c.Stats().Entries != 0 {
		t.Fatal("Complete filled the cache; only records the store returns may")
	}
	c, asked := f.claim("k", "fp")
	if !asked || c.Outcome != store.Completed {
		t.Fatalf("first replay = %v, asked the store %v; want completed from the store", c.Outcome, asked)
	}
	c.Record.Response[0] = 'X' // the caller owns its copy
	for range 3 {
		c, asked = f.claim("k", "fp")
		if asked {
			t.Fatal("a replay of a cached record asked the store")
		}
		if c.Outcome != store.Completed || string(c.Record.Response) != "resp" || c.Record.Token != tok ||
			c.Record.Status != store.StatusCompleted || c.Record.Fingerprint != "fp" || c.Record.Key != "k" {
			t.Fatalf("cached replay = %v %+v; want the completed record", c.Outcome, c.Record)
		}
		c.Record.Response[0] = 'Y'
	}
	r, err := f.c.Get(t.Context(), "k")
	if err != nil || string(r.Response) != "resp" || f.inner.gets.Load() != 0 {
		t.Fatalf("Get = %q, %v after %d store Gets; want the cached record, no store Get", r.Response, err, f.inner.gets.Load())
	}
	if st := f.c.Stats(); st.Hits != 4 || st.Misses != 2 || st.Fills != 1 || st.Entries != 1 || st.Bytes <= 4 {
		t.Fatalf("Stats = %+v; want 4 hits, 2 misses (the first Claim and the first replay), 1 fill, 1 entry", st)
	}
}

func TestGetFillsCache(t *testing.T) {
	f := newFixture(t)
	f.complete("k", []byte("resp"), time.Hour)
	if _, err := f.c.Get(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if c, asked := f.claim("k", "fp"); asked || c.Outcome != store.Completed {
		t.Fatalf("Claim after Get = %v, asked the store %v; want completed from memory", c.Outcome, asked)
	}
}

func TestMismatchStillMismatch(t *testing.T) {
	f := newFixture(t)
	f.complete("k", []byte("resp"), time.Hour)
	f.claim("k", "fp") // fills
	c, asked := f.claim("k", "other")
	if !asked || c.Outcome != store.Mismatch || c.Record.Fingerprint != "fp" {
		t.Fatalf("Claim with another fingerprint = %v (fingerprint %q), asked the store %v; want mismatch from the store", c.Outcome, c.Record.Fingerprint, asked)
	}
}

func TestInProgressNeverCached(t *testing.T) {
	f := newFixture(t)
	holder := store.NewToken()
	if _, err := f.c.Claim(t.Context(), "k", "fp", holder, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c, asked := f.claim("k", "fp"); !asked || c.Outcome != store.InProgress {
			t.Fatalf("duplicate in flight = %v, asked the store %v; want in progress from the store", c.Outcome, asked)
		}
		if r, err := f.c.Get(t.Context(), "k"); err != nil || r.Status != store.StatusInProgress {
			t.Fatalf("Get = %v, %v", r.Status, err)
		}
	}
	if st := f.c.Stats(); st.Entries != 0 || st.Fills != 0 || f.inner.gets.Load() != 2 {
		t.Fatalf("Stats = %+v after %d store Gets; want nothing cached, every Get from the store", st, f.inner.gets.Load())
	}
	// Released, the key is claimable again through the cache.
	if err := f.c.Release(t.Context(), "k", holder); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.claim("k", "fp"); c.Outcome != store.Acquired {
		t.Fatalf("Claim after Release = %v, want acquired", c.Outcome)
	}
}

// TestRetriedCompleteKeepsFirst: a retried Complete with another response
// succeeds and the store keeps the first; the cache must replay the first.
func TestRetriedCompleteKeepsFirst(t *testing.T) {
	f := newFixture(t)
	tok := f.complete("k", []byte("first"), time.Hour)
	if err := f.c.Complete(t.Context(), "k", tok, []byte("second"), time.Hour); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c, _ := f.claim("k", "fp"); string(c.Record.Response) != "first" {
			t.Fatalf("replay = %q, want the first response", c.Record.Response)
		}
	}
}

// TestExpiryExact: a cached record is served up to the last instant before
// its ExpiresAt less the margin, and never at or after it.
func TestExpiryExact(t *testing.T) {
	for _, margin := range []time.Duration{0, time.Second, 5 * time.Second} {
		t.Run(fmt.Sprint(margin), func(t *testing.T) {
			f := newFixture(t, cache.WithMargin(margin))
			f.complete("k", []byte("resp"), time.Minute)
			c, _ := f.claim("k", "fp")
			expires := c.Record.ExpiresAt
			f.clock.Advance(expires.Sub(f.clock.Now()) - margin - time.Nanosecond)
			if c, asked := f.claim("k", "fp"); asked || c.Outcome != store.Completed {
				t.Fatalf("1ns before ExpiresAt-margin: %v, asked the store %v; want served from memory", c.Outcome, asked)
			}
			f.clock.Advance(time.Nanosecond)
			c, asked := f.claim("k", "fp")
			if !asked {
				t.Fatal("at ExpiresAt-margin the cache still served the record")
			}
			want := store.Completed
			if margin == 0 {
				want = store.Acquired // the store's record expired at this instant
			}
			if c.Outcome != want {
				t.Fatalf("at ExpiresAt-margin: %v, want %v", c.Outcome, want)
			}
			if margin == 0 && f.c.Stats().Expired != 1 {
				t.Fatalf("Stats = %+v, want one expired", f.c.Stats())
			}
		})
	}
}

// TestFillSkipsRecordsAboutToExpire: a record whose ExpiresAt is within the
// margin is never cached.
func TestFillSkipsRecordsAboutToExpire(t *testing.T) {
	f := newFixture(t, cache.WithMargin(time.Minute))
	f.complete("k", []byte("resp"), 30*time.Second)
	f.claim("k", "fp")
	if st := f.c.Stats(); st.Entries != 0 {
		t.Fatalf("Stats = %+v; a record expiring within the margin was cached", st)
	}
}

func TestBoundEntriesLRU(t *testing.T) {
	f := newFixture(t, cache.WithMaxEntries(3))
	for i := range 5 {
		k := fmt.Sprint("k", i)
		f.complete(k, []byte("resp"), time.Hour)
		f.claim(k, "fp")
		if i == 2 {
			f.claim("k0", "fp") // k0 is now the most recently used of k0..k2
		}
	}
	st := f.c.Stats()
	if st.Entries != 3 || st.Evictions != 2 {
		t.Fatalf("Stats = %+v; want 3 entries, 2 evictions", st)
	}
	// The cached ones first: a miss fills the cache and evicts another.
	for _, tc := range []struct {
		key    string
		cached bool
	}{{"k0", true}, {"k3", true}, {"k4", true}, {"k1", false}, {"k2", false}} {
		if _, asked := f.claim(tc.key, "fp"); asked == tc.cached {
			t.Errorf("%s: asked the store %v, want cached %v", tc.key, asked, tc.cached)
		}
	}
}

func TestBoundBytes(t *testing.T) {
	resp := bytes.Repeat([]byte("x"), 1000)
	f := newFixture(t, cache.WithMaxBytes(3600))
	for i := range 6 {
		k := fmt.Sprint("k", i)
		f.complete(k, resp, time.Hour)
		f.claim(k, "fp")
		if st := f.c.Stats(); st.Bytes > 3600 {
			t.Fatalf("Stats = %+v: more bytes than the bound", st)
		}
	}
	if st := f.c.Stats(); st.Entries != 3 || st.Evictions != 3 {
		t.Fatalf("Stats = %+v; want 3 entries of about 1.1 KB, 3 evictions", st)
	}
	f.complete("big", bytes.Repeat([]byte("x"), 4000), time.Hour)
	f.claim("big", "fp")
	if _, asked := f.claim("big", "fp"); !asked {
		t.Fatal("a record larger than the bound was cached")
	}
}

// TestDeleteBehindBackAndInvalidate shows the one thing the cache changes
// (a record deleted elsewhere is replayed from memory until its retention
// ends) and that Invalidate undoes it.
func TestDeleteBehindBackAndInvalidate(t *testing.T) {
	f := newFixture(t)
	f.complete("k", []byte("resp"), time.Hour)
	f.complete("j", []byte("resp"), time.Hour)
	f.claim("k", "fp")
	f.claim("j", "fp")
	f.inner.swap(newMemory(t, f.clock.Now)) // every record deleted behind the cache's back
	if c, asked := f.claim("k", "fp"); asked || c.Outcome != store.Completed {
		t.Fatalf("after a delete elsewhere: %v, asked %v; want the documented stale replay", c.Outcome, asked)
	}
	f.c.Invalidate("k")
	if c, asked := f.claim("k", "fp"); !asked || c.Outcome != store.Acquired {
		t.Fatalf("after Invalidate: %v, asked %v; want acquired from the store", c.Outcome, asked)
	}
	f.c.InvalidateAll()
	if c, asked := f.claim("j", "fp"); !asked || c.Outcome != store.Acquired {
		t.Fatalf("after InvalidateAll: %v, asked %v; want acquired from the store", c.Outcome, asked)
	}
}

func TestInvalidArgumentsAndContext(t *testing.T) {
	f := newFixture(t)
	f.complete("k", []byte("resp"), time.Hour)
	f.claim("k", "fp")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.c.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim of a cached key with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := f.c.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get of a cached key with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := f.c.Claim(t.Context(), "k", "fp", store.NewToken(), 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Claim of a cached key with lease 0: %v, want ErrInvalid", err)
	}
	if _, err := f.c.Get(t.Context(), ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Get(\"\"): %v, want ErrInvalid", err)
	}
}

func TestNewRejects(t *testing.T) {
	m := newMemory(t, time.Now)
	for name, tc := range map[string]struct {
		inner store.Store
		opts  []cache.Option
	}{
		"nil store":  {nil, nil},
		"nil option": {m, []cache.Option{nil}},
		"entries 0":  {m, []cache.Option{cache.WithMaxEntries(0)}},
		"bytes -1":   {m, []cache.Option{cache.WithMaxBytes(-1)}},
		"margin -1s": {m, []cache.Option{cache.WithMargin(-time.Second)}},
		"nil clock":  {m, []cache.Option{cache.WithClock(nil)}},
	} {
		if _, err := cache.New(tc.inner, tc.opts...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
}

// TestConcurrentReplays races replays, fills and invalidations of a few
// keys under -race; every answer must be the completed record.
func TestConcurrentReplays(t *testing.T) {
	f := newFixture(t, cache.WithMaxEntries(2))
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		f.complete(k, []byte("resp-"+k), time.Hour)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := keys[(w+i)%len(keys)]
				if i%50 == 0 {
					f.c.Invalidate(k)
				}
				c, err := f.c.Claim(context.Background(), k, "fp", store.NewToken(), time.Minute)
				if err != nil || c.Outcome != store.Completed || string(c.Record.Response) != "resp-"+k {
					t.Errorf("Claim(%q) = %v %q, %v", k, c.Outcome, c.Record.Response, err)
					return
				}
				_ = f.c.Stats()
			}
		})
	}
	wg.Wait()
}

// plain is a store with no optional interface at all.
type plain struct{ store.Store }

// txOnly is a store that is a Transactor and not a Purger.
type txOnly struct{ *sqlite.Store }

func (txOnly) Purge() {} // hides sqlite's Purge(ctx) with another signature

// TestCapabilities: the cache implements Transactor and Purger exactly
// when the wrapped store does.
func TestCapabilities(t *testing.T) {
	sq := openSQLite(t)
	for name, tc := range map[string]struct {
		inner      store.Store
		tx, purger bool
	}{
		"neither":    {plain{newMemory(t, time.Now)}, false, false},
		"purger":     {newMemory(t, time.Now), false, true},
		"transactor": {txOnly{sq}, true, false},
		"both":       {sq, true, true},
	} {
		c := mustCache(t, tc.inner)
		_, tx := c.(store.Transactor)
		_, purger := c.(store.Purger)
		if tx != tc.tx || purger != tc.purger {
			t.Errorf("%s: cache is Transactor %v, Purger %v; want %v, %v", name, tx, purger, tc.tx, tc.purger)
		}
		if c.Unwrap() != tc.inner {
			t.Errorf("%s: Unwrap is not the wrapped store", name)
		}
	}
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestInTxCachesNothing: what a transaction sees (completed, then rolled
// back) is never cached, and after the rollback the key is claimable.
func TestInTxCachesNothing(t *testing.T) {
	c := mustCache(t, openSQLite(t))
	tx := c.(store.Transactor)
	rollback := errors.New("roll back")
	err := tx.InTx(t.Context(), func(ctx context.Context, s store.Store) error {
		tok := store.NewToken()
		if _, err := s.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
			return err
		}
		if err := s.Complete(ctx, "k", tok, []byte("resp"), time.Hour); err != nil {
			return err
		}
		if cl, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); err != nil || cl.Outcome != store.Completed {
			return fmt.Errorf("replay inside the transaction = %v, %v", cl.Outcome, err)
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Entries != 0 {
		t.Fatalf("Stats = %+v: a record seen inside a transaction was cached", st)
	}
	if cl, err := c.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute); err != nil || cl.Outcome != store.Acquired {
		t.Fatalf("Claim after the rollback = %v, %v; want acquired", cl.Outcome, err)
	}
}

// TestConformanceSQLite runs the suite through the cache over SQLite, so
// the Transactor and Purger cases run through the cache's InTx and Purge.
func TestConformanceSQLite(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Now())
			s, err := sqlite.Open(":memory:", sqlite.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			c := mustCache(t, s, cache.WithClock(clock.Now))
			if err := c.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return storetest.Subject{Store: c, Clock: clock}
		},
	})
}
