package linearize_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
	"github.com/idemkit/idemkit/storetest/linearize"
)

// The check is only worth something if it fails stores that break the
// concurrency rules. Each variant of lockStore below keeps the whole
// contract when its calls do not overlap, and breaks it in one window
// between a read and a write: windows the fixed races of storetest do not
// open (they race Claims of fresh and lapsed keys, not a holder's own
// overlapping calls after a lost reply or beside a heartbeat).
var variants = []struct {
	name string
	// storetestMisses says the conformance suite passes it: only the
	// linearizability check under faults catches it.
	storetestMisses bool
}{
	// A retry of a Release after a timeout, while the first still runs:
	// the first deletes the record a third client claimed in between.
	{"release-checks-then-deletes", true},
	// A Complete retried after a timeout with other bytes: the slower
	// first attempt overwrites the response a client was replayed.
	{"complete-checks-then-writes", true},
	// A heartbeat (a re-entrant Claim) that reads, then writes the lease
	// back: racing the holder's Complete or Release, it resurrects a lease
	// over a completed or released key.
	{"renewal-read-then-write", true},
	// A Renew that checks the lease, then writes it back: racing the
	// holder's Release, it brings the released key back (the conformance
	// suite's Renew/ConcurrentWithRelease catches it too).
	{"renew-checks-then-writes", false},
	// Claims of an absent key decided by a read and a separate write (the
	// conformance suite's Claim/ConcurrentSameKey catches it too).
	{"claim-read-then-write", false},
}

func TestCatchesBrokenStores(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var report string
			// A few tries, as a defect that needs two calls to overlap in a
			// window of a few scheduler yields may, rarely, not show in one.
			for try := 0; try < 3 && report == ""; try++ {
				report = linearize.CheckForTest(t, newLockStore(v.name, time.Now), linearize.Harness{Budget: 3 * time.Second})
			}
			if report == "" {
				t.Fatalf("the check passed the %q store; it must fail it", v.name)
			}
			for _, want := range []string{"not linearizable", "no order of these", "client  called"} {
				if !strings.Contains(report, want) {
					t.Errorf("the report lacks %q:\n%s", want, report)
				}
			}
			t.Logf("the %q store's report:\n%s", v.name, report)
		})
	}
}

func TestPassesCorrectStore(t *testing.T) {
	linearize.Run(t, linearize.Harness{
		New:    func(t *testing.T) store.Store { return newLockStore("correct", time.Now) },
		Budget: time.Second,
	})
}

// TestConformanceMissesThem runs the conformance suite on the variants that
// only the linearizability check catches, and on the correct store: all
// pass it.
func TestConformanceMissesThem(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite once per variant")
	}
	names := []string{"correct"}
	for _, v := range variants {
		if v.storetestMisses {
			names = append(names, v.name)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, storetest.Harness{New: func(t *testing.T) storetest.Subject {
				clock := storetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
				return storetest.Subject{Store: newLockStore(name, clock.Now), Clock: clock}
			}})
		})
	}
}

// lockStore is a map behind a mutex, held across each call's check and
// write, but for its variant's one window.
type lockStore struct {
	variant string
	now     func() time.Time
	mu      sync.Mutex
	m       map[string]store.Record
}

func newLockStore(variant string, now func() time.Time) *lockStore {
	return &lockStore{variant: variant, now: now, m: map[string]store.Record{}}
}

// window lets other goroutines run between a read and the write that
// depends on it. The caller holds s.mu, and holds it again afterwards.
func (s *lockStore) window(v string) {
	if s.variant != v {
		return
	}
	s.mu.Unlock()
	for range 5 {
		runtime.Gosched()
	}
	s.mu.Lock()
}

func (s *lockStore) live(key string) (store.Record, bool) {
	r, ok := s.m[key]
	if !ok || !r.ExpiresAt.After(s.now()) {
		return store.Record{}, false
	}
	return r, true
}

func (s *lockStore) out(r store.Record) store.Record {
	r.Response = bytes.Clone(r.Response)
	return r
}

func (s *lockStore) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fp, tok, lease); err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	switch {
	case !ok, r.Status == store.StatusInProgress && r.Token == tok && r.Fingerprint == fp:
		if ok {
			s.window("renewal-read-then-write")
		} else {
			s.window("claim-read-then-write")
		}
		until := s.now().Add(lease)
		prev, found := s.m[key]
		attempt, fence := store.Successor(prev, found, tok, s.now())
		r = store.Record{Key: key, Fingerprint: fp, Status: store.StatusInProgress, Token: tok, LockedUntil: until, ExpiresAt: until, Attempt: attempt, Fence: fence}
		s.m[key] = r
		return store.Claim{Outcome: store.Acquired, Record: s.out(r)}, nil
	case r.Fingerprint != fp:
		return store.Claim{Outcome: store.Mismatch, Record: s.out(r)}, nil
	case r.Status == store.StatusCompleted:
		return store.Claim{Outcome: store.Completed, Record: s.out(r)}, nil
	}
	return store.Claim{Outcome: store.InProgress, Record: s.out(r)}, nil
}

func (s *lockStore) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, tok, retention); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok || r.Token != tok {
		return fmt.Errorf("lockstore: %w", store.ErrLeaseLost)
	}
	if r.Status == store.StatusCompleted {
		return nil
	}
	s.window("complete-checks-then-writes")
	r.Status, r.Response = store.StatusCompleted, bytes.Clone(resp)
	r.LockedUntil, r.ExpiresAt = time.Time{}, s.now().Add(retention)
	s.m[key] = r
	return nil
}

func (s *lockStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := store.CheckRelease(key, tok); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.live(key); ok && r.Status == store.StatusInProgress && r.Token == tok {
		s.window("release-checks-then-deletes")
		delete(s.m, key)
	}
	return nil
}

// Renew implements store.Store.
func (s *lockStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, tok, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok || r.Status != store.StatusInProgress || r.Token != tok {
		return store.ErrLeaseLost
	}
	s.window("renew-checks-then-writes")
	r.LockedUntil = s.now().Add(lease)
	r.ExpiresAt = r.LockedUntil
	s.m[key] = r
	return nil
}

func (s *lockStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok {
		return store.Record{}, fmt.Errorf("lockstore: %w", store.ErrNotFound)
	}
	return s.out(r), nil
}
