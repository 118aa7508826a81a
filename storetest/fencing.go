package storetest

import (
	"time"

	"github.com/idemkit/idemkit/store"
)

var fencingCases = []testCase{
	{"CompleteAfterTakeover", func(e *env) {
		old, cur := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", old, e.short(), store.Acquired)
		e.lapse(e.short())
		taken := e.claimWant("k", "fp", cur, long, store.Acquired)
		e.wait(e.gap())
		e.wantLeaseLost(e.complete("k", old, []byte("stale"), long), "Complete by the old holder after another token took over")
		r := e.wantInProgress("k", "fp", cur)
		e.wantSame("the new holder's LockedUntil after the stale Complete", r.LockedUntil, taken.Record.LockedUntil)
		e.mustComplete("k", cur, []byte("fresh"), long)
		e.wantCompleted("k", "fp", cur, []byte("fresh"))
		e.wantLeaseLost(e.complete("k", old, []byte("stale"), long), "Complete by the old holder after the new one completed")
		e.wantCompleted("k", "fp", cur, []byte("fresh"))
	}},
	{"ReleaseAfterTakeover", func(e *env) {
		old, cur := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", old, e.short(), store.Acquired)
		e.lapse(e.short())
		e.claimWant("k", "fp", cur, long, store.Acquired)
		e.mustRelease("k", old)
		e.wantInProgress("k", "fp", cur)
	}},
	{"ClaimAfterTakeover", func(e *env) {
		old, cur := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", old, e.short(), store.Acquired)
		e.lapse(e.short())
		e.claimWant("k", "fp", cur, long, store.Acquired)
		c := e.claimWant("k", "fp", old, long, store.InProgress)
		e.checkInProgress("the old holder's Claim", c.Record, "fp", cur)
	}},
}

var expiryCases = []testCase{
	{"RenewalKeepsLease", func(e *env) {
		// Claim with lease L, renew after 0.6L, and check at 1.2L that the
		// key is still held: the renewal counted from its own time.
		tok, other := store.NewToken(), store.NewToken()
		e.renewedPastFirstLease("k", tok, 4*e.short())
		e.wantInProgress("k", "fp", tok)
		e.claimWant("k", "fp", other, long, store.InProgress)
	}},
	{"LeaseLivesUntilLockedUntil", func(e *env) {
		tok, other := store.NewToken(), store.NewToken()
		lease := 4 * e.short()
		e.claimWant("k", "fp", tok, lease, store.Acquired)
		e.wait(lease / 2)
		e.claimWant("k", "fp", other, long, store.InProgress)
		e.wantInProgress("k", "fp", tok)
	}},
	{"RetentionLivesUntilExpiresAt", func(e *env) {
		tok := store.NewToken()
		retention := 4 * e.short()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("r"), retention)
		e.wait(retention / 2)
		e.claimWant("k", "fp", store.NewToken(), long, store.Completed)
		e.lapse(retention / 2)
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"SubMillisecondDurations", func(e *env) {
		// Durations shorter than a backend's resolution are still positive
		// leases and retentions: a store may round them up to its
		// resolution, never down (to zero, or to a lease already lapsed).
		tok := store.NewToken()
		if e.clock != nil {
			// Nothing has passed on the suite's clock, so a 1µs lease is
			// held; 1.2ms into a 1.5ms lease or retention the record is
			// still live.
			e.claimWant("held", "fp", tok, time.Microsecond, store.Acquired)
			e.wantInProgress("held", "fp", tok)
			e.claimWant("held", "fp", store.NewToken(), long, store.InProgress)
			e.claimWant("lease", "fp", tok, 1500*time.Microsecond, store.Acquired)
			done := store.NewToken()
			e.claimWant("retained", "fp", done, long, store.Acquired)
			e.mustComplete("retained", done, []byte("r"), 1500*time.Microsecond)
			e.wait(1200 * time.Microsecond)
			e.wantInProgress("lease", "fp", tok)
			e.wantCompleted("retained", "fp", done, []byte("r"))
		}
		e.claimWant("k", "fp", tok, time.Microsecond, store.Acquired)
		e.lapse(time.Millisecond)
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"LongDurations", func(e *env) {
		// Leases and retentions of months or years are durations like any
		// other (memcached reads an expiry over 30 days as a Unix time).
		const month, year = 31 * 24 * time.Hour, 400 * 24 * time.Hour
		tok, done := store.NewToken(), store.NewToken()
		before := e.now()
		c := e.claimWant("lease", "fp", tok, year, store.Acquired)
		e.wantNear("LockedUntil of a 400-day lease", c.Record.LockedUntil, before.Add(year))
		c = e.claimWant("retained", "fp", done, month, store.Acquired)
		e.wantNear("LockedUntil of a 31-day lease", c.Record.LockedUntil, before.Add(month))
		e.mustComplete("retained", done, []byte("r"), year)
		r := e.wantCompleted("retained", "fp", done, []byte("r"))
		e.wantNear("ExpiresAt of a 400-day retention", r.ExpiresAt, before.Add(year))
		if e.clock != nil {
			e.wait(2 * month)
		}
		e.claimWant("lease", "fp", store.NewToken(), long, store.InProgress)
		e.claimWant("retained", "fp", store.NewToken(), long, store.Completed)
	}},
	{"Boundary", func(e *env) {
		// A record is live while the store's clock is before its
		// ExpiresAt (LockedUntil, in progress) and absent from that very
		// instant on. Checked at the deadlines the store reported, so a
		// store that reports them late by up to Harness.Jitter passes.
		if e.clock == nil {
			e.Skip("needs Subject.Clock: the real clock cannot be stopped at an instant")
		}
		lease := e.short()
		tok, done := store.NewToken(), store.NewToken()
		c := e.claimWant("lease", "fp", tok, lease, store.Acquired)
		e.claimWant("retained", "fp", done, long, store.Acquired)
		e.mustComplete("retained", done, []byte("r"), 2*lease)
		kept := e.wantCompleted("retained", "fp", done, []byte("r"))
		e.advanceTo(c.Record.LockedUntil.Add(-time.Millisecond - e.h.Jitter))
		e.wantInProgress("lease", "fp", tok)
		e.advanceTo(c.Record.LockedUntil)
		e.wantAbsent("lease", "at exactly its LockedUntil "+ts(c.Record.LockedUntil))
		e.claimWant("lease", "fp", store.NewToken(), long, store.Acquired)
		e.advanceTo(kept.ExpiresAt.Add(-time.Millisecond - e.h.Jitter))
		e.claimWant("retained", "fp", store.NewToken(), long, store.Completed)
		e.advanceTo(kept.ExpiresAt)
		e.wantAbsent("retained", "at exactly its ExpiresAt "+ts(kept.ExpiresAt))
		e.claimWant("retained", "fp", store.NewToken(), long, store.Acquired)
	}},
}

// renewedPastFirstLease has tok claim key with lease, renew it after 0.6
// of the lease, and lets another 0.6 pass: the first lease is over, the
// renewed one is not.
func (e *env) renewedPastFirstLease(key string, tok store.Token, lease time.Duration) {
	e.Helper()
	step := lease * 6 / 10
	e.claimWant(key, "fp", tok, lease, store.Acquired)
	e.wait(step)
	e.claimWant(key, "fp", tok, lease, store.Acquired)
	e.wait(step)
}

// advanceTo moves the suite's clock forward to t.
func (e *env) advanceTo(t time.Time) {
	e.Helper()
	d := t.Sub(e.clock.Now())
	if d < 0 {
		e.Fatalf("storetest: internal error: the clock is already %v past %s", -d, ts(t))
	}
	e.clock.Advance(d)
}
