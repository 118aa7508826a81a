package storetest

import "github.com/idemkit/idemkit/store"

var releaseCases = []testCase{
	{"Held", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", t1, long, store.Acquired)
		e.mustRelease("k", t1)
		e.wantAbsent("k", "after Release by the holder")
		e.claimWant("k", "fp", t2, long, store.Acquired)
	}},
	{"Retried", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustRelease("k", tok)
		e.mustRelease("k", tok)
		e.wantAbsent("k", "after a retried Release")
	}},
	{"OtherToken", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		first := e.claimWant("k", "fp", t1, long, store.Acquired)
		e.wait(e.gap())
		e.mustRelease("k", t2)
		r := e.wantInProgress("k", "fp", t1)
		e.wantSame("the holder's LockedUntil after Release by another token", r.LockedUntil, first.Record.LockedUntil)
	}},
	{"Completed", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", t1, long, store.Acquired)
		e.mustComplete("k", t1, []byte("kept"), long)
		e.mustRelease("k", t1)
		e.wantCompleted("k", "fp", t1, []byte("kept"))
		e.mustRelease("k", t2)
		e.wantCompleted("k", "fp", t1, []byte("kept"))
	}},
	{"Absent", func(e *env) {
		e.mustRelease("k", store.NewToken())
		e.wantAbsent("k", "after Release of a never-claimed key")
	}},
}

var getCases = []testCase{
	{"Absent", func(e *env) { e.wantAbsent("never-claimed", "of a never-claimed key") }},
	{"InProgress", func(e *env) {
		tok := store.NewToken()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		r := e.wantInProgress("k", "fp", tok)
		e.wantSame("Get's LockedUntil (the one Claim returned)", r.LockedUntil, c.Record.LockedUntil)
		e.wantSame("Get's ExpiresAt (the one Claim returned)", r.ExpiresAt, c.Record.ExpiresAt)
	}},
	{"Completed", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("resp"), long)
		e.wantCompleted("k", "fp", tok, []byte("resp"))
	}},
	{"LapsedLease", func(e *env) {
		e.claimWant("k", "fp", store.NewToken(), e.short(), store.Acquired)
		e.lapse(e.short())
		e.wantAbsent("k", "after the lease lapsed")
	}},
	{"RetentionOver", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("resp"), e.short())
		e.wantCompleted("k", "fp", tok, []byte("resp"))
		e.lapse(e.short())
		e.wantAbsent("k", "after the retention ran out")
	}},
}
