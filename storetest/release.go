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
		e.mustRelease("k", t2)
		r := e.wantInProgress("k", "fp", t1)
		if !r.LockedUntil.Equal(first.Record.LockedUntil) {
			e.Errorf("Release by another token moved the holder's lease from %v to %v", first.Record.LockedUntil, r.LockedUntil)
		}
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
		if !r.LockedUntil.Equal(c.Record.LockedUntil) || !r.ExpiresAt.Equal(c.Record.ExpiresAt) {
			e.Errorf("Get: %s, differs from the record Claim returned: %s", describe(r), describe(c.Record))
		}
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
