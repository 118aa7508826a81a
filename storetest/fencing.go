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
		lease := 4 * e.short()
		step := lease * 6 / 10
		e.claimWant("k", "fp", tok, lease, store.Acquired)
		e.wait(step)
		e.claimWant("k", "fp", tok, lease, store.Acquired)
		e.wait(step)
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
		// Durations shorter than a backend's resolution must still be
		// positive leases, not zero or "forever".
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, time.Microsecond, store.Acquired)
		e.lapse(time.Millisecond)
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
}
