package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// renewCases check Store.Renew: it extends a live lease its token holds and
// in every other case returns ErrLeaseLost without writing anything.
var renewCases = []testCase{
	{"ExtendsOwnLease", func(e *env) {
		// Claim with lease L, Renew after 0.6L, and check at 1.2L that the
		// key is still held: the renewal counted from its own time.
		tok := store.NewToken()
		lease := 4 * e.short()
		step := lease * 6 / 10
		c := e.claimWant("k", "fp", tok, lease, store.Acquired)
		e.wait(step)
		e.mustRenew("k", tok, lease)
		e.wait(step)
		r := e.wantInProgress("k", "fp", tok)
		e.wantMoved("LockedUntil after Renew", r.LockedUntil, c.Record.LockedUntil, step)
		e.claimWant("k", "fp", store.NewToken(), long, store.InProgress)
	}},
	{"KeepsRecord", func(e *env) {
		// Renew moves the lease and nothing else: same fingerprint, token,
		// attempt and fence.
		tok := store.NewToken()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wait(e.gap())
		e.mustRenew("k", tok, 2*long)
		r := e.wantInProgress("k", "fp", tok)
		if r.Attempt != c.Record.Attempt || r.Fence != c.Record.Fence {
			e.Errorf("after Renew: attempt %d, fence %d; want the claim's %d and %d", r.Attempt, r.Fence, c.Record.Attempt, c.Record.Fence)
		}
		e.wantNear("LockedUntil after Renew(2×long)", r.LockedUntil, e.now().Add(2*long))
	}},
	{"Absent", func(e *env) {
		e.wantLeaseLost(e.renew("k", store.NewToken(), long), "Renew of a key never claimed")
		e.wantAbsent("k", "after Renew of a key never claimed (Renew must never create a record)")
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the first claim after a refused Renew", c.Record, 1)
	}},
	{"AfterRelease", func(e *env) {
		// A renewal that reaches the store after the holder released the
		// key leaves it free for the retry the release was for.
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustRelease("k", tok)
		e.wantLeaseLost(e.renew("k", tok, long), "Renew after the holder released the key")
		e.wantAbsent("k", "after a Renew that arrived after the release")
		retry := store.NewToken()
		c := e.claimWant("k", "fp", retry, long, store.Acquired)
		e.wantAttempt("the retry's claim after the release", c.Record, 1)
	}},
	{"AfterLapse", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, e.short(), store.Acquired)
		e.lapse(e.short())
		e.wantLeaseLost(e.renew("k", tok, long), "Renew of the token's own lapsed lease")
		e.wantAbsent("k", "after Renew of a lapsed lease (Renew must not revive it)")
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"Completed", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("r"), long)
		before := e.wantCompleted("k", "fp", tok, []byte("r"))
		e.wait(e.gap())
		e.wantLeaseLost(e.renew("k", tok, 2*long), "Renew by the token that completed the key")
		r := e.wantCompleted("k", "fp", tok, []byte("r"))
		e.wantSame("ExpiresAt after the refused Renew", r.ExpiresAt, before.ExpiresAt)
	}},
	{"OtherToken", func(e *env) {
		tok := store.NewToken()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wait(e.gap())
		e.wantLeaseLost(e.renew("k", store.NewToken(), 2*long), "Renew by a token that does not hold the key")
		r := e.wantInProgress("k", "fp", tok)
		e.wantSame("the holder's LockedUntil after another token's Renew", r.LockedUntil, c.Record.LockedUntil)
	}},
	{"AfterTakeover", func(e *env) {
		old, cur := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", old, e.short(), store.Acquired)
		e.lapse(e.short())
		taken := e.claimWant("k", "fp", cur, long, store.Acquired)
		e.wait(e.gap())
		e.wantLeaseLost(e.renew("k", old, 2*long), "Renew by the holder whose lease was taken over")
		r := e.wantInProgress("k", "fp", cur)
		e.wantSame("the new holder's LockedUntil after the stale Renew", r.LockedUntil, taken.Record.LockedUntil)
	}},
	{"Retried", func(e *env) {
		// A renewal retried after a lost reply succeeds again.
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustRenew("k", tok, long)
		e.mustRenew("k", tok, long)
		e.wantInProgress("k", "fp", tok)
	}},
	{"ConcurrentWithRelease", renewConcurrentWithRelease},
}

// renewConcurrentWithRelease races a heartbeat renewing each of many keys
// against the holder releasing it, with real goroutines. Every key must end
// free, and once Release has returned no Renew may succeed: a renewal that
// reaches the store late must not bring the key back.
func renewConcurrentWithRelease(e *env) {
	const keys = 40
	lease := long
	toks := make([]store.Token, keys)
	for i := range toks {
		toks[i] = store.NewToken()
		e.claimWant("k"+itoa(i), "fp", toks[i], lease, store.Acquired)
	}
	var (
		wg    sync.WaitGroup
		late  atomic.Int64 // renewals that succeeded although they began after Release returned
		fails atomic.Int64 // calls that failed with something else than ErrLeaseLost
		first error
		mu    sync.Mutex
	)
	fail := func(err error) {
		fails.Add(1)
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for i := range toks {
		key, tok := "k"+itoa(i), toks[i]
		var released atomic.Bool
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; n < 1000; n++ {
				after := released.Load()
				err := e.s.Renew(e.ctx, key, tok, lease)
				switch {
				case err == nil && after:
					late.Add(1)
				case err == nil:
					continue
				case !errors.Is(err, store.ErrLeaseLost):
					fail(err)
				}
				if after || err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if err := e.s.Release(e.ctx, key, tok); err != nil {
				fail(err)
			}
			released.Store(true)
		}()
		close(start)
	}
	wg.Wait()
	if n := fails.Load(); n > 0 {
		e.Fatalf("%d Renew or Release calls failed while racing: first %v", n, first)
	}
	if n := late.Load(); n > 0 {
		e.Errorf("%d renewals began after their key's Release returned and still succeeded, want 0: Renew must refuse a released key", n)
	}
	for i := range toks {
		e.wantAbsent("k"+itoa(i), "after its holder's Release raced a renewal (a late renewal brought it back)")
	}
}

// attemptCases check Record.Attempt and Record.Fence as store.Successor
// defines them.
var attemptCases = []testCase{
	{"FirstClaim", func(e *env) {
		before := e.now()
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("a first claim", c.Record, 1)
		if c.Takeover() {
			e.Errorf("a first claim reports Takeover")
		}
		e.wantFenceFromClock("a first claim", c.Record.Fence, before)
		r := e.get("k")
		if r.Attempt != 1 || r.Fence != c.Record.Fence {
			e.Errorf("Get after the first claim: attempt %d, fence %d; want 1 and the claim's %d", r.Attempt, r.Fence, c.Record.Fence)
		}
	}},
	{"ReentrantAndCompleteKeep", func(e *env) {
		tok := store.NewToken()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wait(e.gap())
		again := e.claimWant("k", "fp", tok, long, store.Acquired)
		if again.Record.Attempt != c.Record.Attempt || again.Record.Fence != c.Record.Fence {
			e.Errorf("a re-entrant claim: attempt %d, fence %d; want the first claim's %d and %d", again.Record.Attempt, again.Record.Fence, c.Record.Attempt, c.Record.Fence)
		}
		e.mustComplete("k", tok, []byte("r"), long)
		r := e.wantCompleted("k", "fp", tok, []byte("r"))
		if r.Attempt != c.Record.Attempt || r.Fence != c.Record.Fence {
			e.Errorf("the completed record: attempt %d, fence %d; want the claim's %d and %d", r.Attempt, r.Fence, c.Record.Attempt, c.Record.Fence)
		}
	}},
	{"Takeover", func(e *env) {
		// The second holder sees attempt 2 and a larger fence; the first
		// holder's late Complete is refused; a third holder sees 3.
		first, second, third := store.NewToken(), store.NewToken(), store.NewToken()
		a := e.claimWant("k", "fp", first, e.short(), store.Acquired)
		e.lapse(e.short())
		b := e.claimWant("k", "fp", second, e.short(), store.Acquired)
		e.wantAttempt("the claim that took over a lapsed lease", b.Record, 2)
		if !b.Takeover() {
			e.Errorf("the claim that took over a lapsed lease does not report Takeover")
		}
		if b.Record.Fence <= a.Record.Fence {
			e.Errorf("the takeover's fence %d is not larger than the first holder's %d", b.Record.Fence, a.Record.Fence)
		}
		e.wantLeaseLost(e.complete("k", first, []byte("stale"), long), "Complete by the first holder after the takeover")
		e.wantInProgress("k", "fp", second)
		e.lapse(e.short())
		c := e.claimWant("k", "fp", third, long, store.Acquired)
		e.wantAttempt("the claim that took over a second time", c.Record, 3)
		if c.Record.Fence <= b.Record.Fence {
			e.Errorf("the second takeover's fence %d is not larger than %d", c.Record.Fence, b.Record.Fence)
		}
		e.mustComplete("k", third, []byte("r"), long)
		r := e.wantCompleted("k", "fp", third, []byte("r"))
		e.wantAttempt("the record completed by the third holder", r, 3)
	}},
	{"OwnLapsedLeaseCounts", func(e *env) {
		// A holder that claims its own lapsed lease again takes it over
		// too: the key was free meanwhile.
		tok := store.NewToken()
		a := e.claimWant("k", "fp", tok, e.short(), store.Acquired)
		e.lapse(e.short())
		b := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wantAttempt("the holder's claim of its own lapsed lease", b.Record, 2)
		if b.Record.Fence <= a.Record.Fence {
			e.Errorf("the fence %d after the lapse is not larger than %d", b.Record.Fence, a.Record.Fence)
		}
	}},
	{"ReleaseStartsAgain", func(e *env) {
		// A release says the work had no effect: the next claim counts
		// from 1, with a fence larger than the released one's.
		first := store.NewToken()
		a := e.claimWant("k", "fp", first, e.short(), store.Acquired)
		e.lapse(e.short())
		b := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the takeover", b.Record, 2)
		e.mustRelease("k", b.Record.Token)
		e.wait(e.gap())
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the claim after a release", c.Record, 1)
		if c.Record.Fence <= b.Record.Fence || b.Record.Fence <= a.Record.Fence {
			e.Errorf("fences %d, %d, %d: want them growing across the takeover and the release", a.Record.Fence, b.Record.Fence, c.Record.Fence)
		}
	}},
	{"ReleaseLeavesLapsedLease", func(e *env) {
		// Release by a holder whose lease lapsed changes nothing: the
		// record stays, and the claim that takes it over counts it.
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, e.short(), store.Acquired)
		e.lapse(e.short())
		e.mustRelease("k", tok)
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the takeover after the lapsed holder's Release", c.Record, 2)
	}},
	{"RetentionOverStartsAgain", func(e *env) {
		tok := store.NewToken()
		a := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("r"), e.short())
		e.lapse(e.short())
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the claim after the retention ended", c.Record, 1)
		if c.Record.Fence <= a.Record.Fence {
			e.Errorf("the fence %d after the retention is not larger than %d", c.Record.Fence, a.Record.Fence)
		}
	}},
	{"PurgeKeepsLapsed", func(e *env) {
		p, ok := e.s.(store.Purger)
		if !ok {
			e.Skip("store does not implement store.Purger")
		}
		e.claimWant("k", "fp", store.NewToken(), e.short(), store.Acquired)
		e.lapse(e.short())
		if n, err := p.Purge(e.ctx); err != nil || n != 0 {
			e.Errorf("Purge just after a lease lapsed = %d, %v; want 0, nil (a lapsed record is kept store.LapsedKept)", n, err)
		}
		c := e.claimWant("k", "fp", store.NewToken(), e.short(), store.Acquired)
		e.wantAttempt("the takeover after Purge", c.Record, 2)
		if e.clock == nil {
			return // the rest waits out store.LapsedKept
		}
		e.clock.Advance(e.short() + store.LapsedKept + e.h.Tolerance)
		if n, err := p.Purge(e.ctx); err != nil || n != 1 {
			e.Errorf("Purge a LapsedKept after the lease lapsed = %d, %v; want 1, nil", n, err)
		}
		c = e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the claim after the lapsed record was purged", c.Record, 1)
	}},
	{"InspectorReports", func(e *env) {
		in, ok := e.s.(store.Inspector)
		if !ok {
			e.Skip("store does not implement store.Inspector")
		}
		e.claimWant("k", "fp", store.NewToken(), e.short(), store.Acquired)
		e.lapse(e.short())
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		got, err := in.Lookup(e.ctx, "k")
		if err != nil {
			e.Fatalf("Lookup after a takeover: %v", err)
		}
		if got.Attempt != c.Record.Attempt || got.Fence != c.Record.Fence {
			e.Errorf("Lookup after a takeover: attempt %d, fence %d; want the claim's %d and %d", got.Attempt, got.Fence, c.Record.Attempt, c.Record.Fence)
		}
	}},
	{"ConcurrentTakeover", func(e *env) {
		// Of many goroutines taking over one lapsed lease, one acquires,
		// with attempt 2.
		e.claimWant("k", "fp", store.NewToken(), e.short(), store.Acquired)
		e.lapse(e.short())
		const n = 16
		claims := make([]store.Claim, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				claims[i], errs[i] = e.s.Claim(e.ctx, "k", "fp", store.NewToken(), long)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, c := range claims {
			if errs[i] != nil {
				e.Fatalf("a concurrent takeover's Claim: %v", errs[i])
			}
			if c.Outcome == store.Acquired {
				won++
				e.wantAttempt("the concurrent takeover that won", c.Record, 2)
			}
		}
		if won != 1 {
			e.Errorf("%d of %d concurrent takeovers acquired the key, want 1", won, n)
		}
	}},
}

func (e *env) renew(key string, tok store.Token, lease time.Duration) error {
	e.Helper()
	return e.s.Renew(e.ctx, key, tok, lease)
}

func (e *env) mustRenew(key string, tok store.Token, lease time.Duration) {
	e.Helper()
	if err := e.renew(key, tok, lease); err != nil {
		e.Fatalf("Renew(%s, %s, %v) by the holder of a live lease: %v, want nil", qs(key), qs(string(tok)), lease, err)
	}
}

func (e *env) wantAttempt(what string, r store.Record, want uint32) {
	e.Helper()
	if r.Attempt != want {
		e.Errorf("%s: Attempt = %d, want %d", what, r.Attempt, want)
	}
}

// wantFenceFromClock checks that a fresh claim's fence is the store's clock
// in microseconds, as Successor computes it, within the tolerance.
func (e *env) wantFenceFromClock(what string, fence uint64, before time.Time) {
	e.Helper()
	lo := uint64(max(before.Add(-e.h.Tolerance).UnixMicro(), 1))
	hi := uint64(e.now().Add(e.h.Tolerance).UnixMicro())
	if fence < lo || fence > hi {
		e.Errorf("%s: Fence = %d, want the store's clock in µs, between %d and %d", what, fence, lo, hi)
	}
}
