package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Harness tells the suite how to make stores of the backend under test.
// It is a struct so that fields added later do not break existing harnesses;
// only New is required.
type Harness struct {
	// New returns a fresh, empty store, isolated from every other store New
	// returns (its own table, key prefix or process), together with the clock
	// that store reads. It is called once per subtest with that subtest's t;
	// register cleanup with t.Cleanup and fail with t.Fatal.
	New func(t *testing.T) Subject

	// NewBench returns the store for one benchmark of RunBenchmarks, as New
	// does for a subtest. It may return a store shared by several
	// benchmarks (a preloaded table, say): the benchmarks' keys are unique
	// to each run. Only RunBenchmarks needs it.
	NewBench func(b *testing.B) Subject

	// ShortLease is the lease the suite uses when it must wait for a lease or
	// retention to run out on the real clock (Subject.Clock is nil).
	// Default 300ms. With a Clock the suite advances it instead of sleeping.
	ShortLease time.Duration

	// Tolerance is how far a time the store reports (LockedUntil, ExpiresAt)
	// may stray from the one the suite expects, for rounding and clock skew
	// between this process and a database server. Default 1s.
	Tolerance time.Duration

	// MaxKeyLen and MaxFingerprintLen are the longest key and fingerprint,
	// in bytes, the store accepts; longer ones must be rejected with
	// store.ErrInvalid. Default store.MaxKeyLen and store.MaxFingerprintLen,
	// which every backend of this module accepts; a backend that cannot
	// store as much may declare less (never more: callers rely on the
	// defaults).
	MaxKeyLen, MaxFingerprintLen int

	// Jitter is how far two reports of one unchanged deadline may differ: a
	// store that derives LockedUntil or ExpiresAt from a remaining TTL, or
	// stores them at a coarse resolution, reports a millisecond or so apart
	// from one call to the next. Checks that a deadline did not move allow
	// this much; checks that a renewal moved it wait a gap of at least ten
	// times this much first. Default 5ms.
	Jitter time.Duration

	// Timeout bounds each subtest. A subtest still running after Timeout has
	// its context cancelled and is reported as failed; one still stuck 5s
	// later (a deadlock that ignores its context) stops the test binary with
	// a panic that names it, instead of hanging until go test's own timeout.
	// Default 60s.
	Timeout time.Duration
}

// Subject is one store under test and the clock it reads.
type Subject struct {
	Store store.Store
	// Clock is the clock Store reads, or nil if it reads the real clock
	// (its own, or its server's). With a Clock, time-dependent cases run
	// instantly; without one they sleep for about ShortLease.
	Clock Clock

	// Effect and CountEffects let the Transactor cases check the caller's
	// own writes, for a store that implements store.Transactor; cases that
	// need them skip when either is nil. Effect writes one effect row for
	// key through the transaction that ctx carries (the one InTx passed to
	// fn; postgres.TxFrom, sqlite.TxFrom), and fails if ctx carries none.
	// CountEffects counts the committed effect rows for key, outside any
	// transaction.
	Effect       func(ctx context.Context, key string) error
	CountEffects func(ctx context.Context, key string) (int, error)
}

// Clock is a clock the suite can move forward. ManualClock implements it;
// a backend whose server keeps its own time (miniredis) can implement it by
// moving both.
type Clock interface {
	// Now returns the time the store sees now.
	Now() time.Time
	// Advance moves the time the store sees forward by d.
	Advance(d time.Duration)
}

// ManualClock is a Clock that moves only when told to. Pass its Now method to
// a store's clock option. It is safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock set to start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (h Harness) withDefaults() Harness {
	if h.ShortLease <= 0 {
		h.ShortLease = 300 * time.Millisecond
	}
	if h.Tolerance <= 0 {
		h.Tolerance = time.Second
	}
	if h.MaxKeyLen <= 0 || h.MaxKeyLen > store.MaxKeyLen {
		h.MaxKeyLen = store.MaxKeyLen
	}
	if h.MaxFingerprintLen <= 0 || h.MaxFingerprintLen > store.MaxFingerprintLen {
		h.MaxFingerprintLen = store.MaxFingerprintLen
	}
	if h.Jitter <= 0 {
		h.Jitter = 5 * time.Millisecond
	}
	if h.Timeout <= 0 {
		h.Timeout = 60 * time.Second
	}
	return h
}
