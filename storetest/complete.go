package storetest

import (
	"bytes"
	"errors"

	"github.com/idemkit/idemkit/store"
)

var completeCases = []testCase{
	{"Held", func(e *env) {
		tok := store.NewToken()
		resp := []byte(`{"id":42}`)
		e.claimWant("k", "fp", tok, long, store.Acquired)
		before := e.now()
		e.mustComplete("k", tok, resp, long)
		r := e.wantCompleted("k", "fp", tok, resp)
		e.wantNear("ExpiresAt after Complete", r.ExpiresAt, before.Add(long))
	}},
	{"RetriedKeepsFirst", func(e *env) {
		// A retried Complete (its first reply was lost) succeeds, but the
		// stored response never changes once completed: a client may
		// already have been replayed the first one. Its retention stays too.
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, []byte("first"), long)
		first := e.wantCompleted("k", "fp", tok, []byte("first"))
		e.wait(e.gap())
		if err := e.complete("k", tok, []byte("second"), 2*long); err != nil {
			e.Fatalf("retried Complete by the completing token: %v, want nil", err)
		}
		r := e.wantCompleted("k", "fp", tok, []byte("first"))
		e.wantSame("ExpiresAt after a retried Complete (the first retention stays)", r.ExpiresAt, first.ExpiresAt)
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Completed)
		e.checkCompleted("replay after a retried Complete", c.Record, "fp", tok, []byte("first"))
	}},
	{"Absent", func(e *env) {
		e.wantLeaseLost(e.complete("k", store.NewToken(), []byte("r"), long), "Complete of a never-claimed key")
		e.wantAbsent("k", "after a refused Complete")
	}},
	{"OtherTokenInProgress", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		first := e.claimWant("k", "fp", t1, long, store.Acquired)
		e.wait(e.gap())
		e.wantLeaseLost(e.complete("k", t2, []byte("r"), long), "Complete by a token that does not hold the key")
		r := e.wantInProgress("k", "fp", t1)
		e.wantSame("the holder's LockedUntil after a refused Complete", r.LockedUntil, first.Record.LockedUntil)
	}},
	{"OtherTokenCompleted", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp", t1, long, store.Acquired)
		e.mustComplete("k", t1, []byte("original"), long)
		e.wantLeaseLost(e.complete("k", t2, []byte("overwrite"), long), "Complete by another token of a completed key")
		e.wantCompleted("k", "fp", t1, []byte("original"))
	}},
	{"AfterRelease", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustRelease("k", tok)
		e.wantLeaseLost(e.complete("k", tok, []byte("r"), long), "Complete after Release")
		e.wantAbsent("k", "after Release and a refused Complete")
	}},
	{"AfterLapse", func(e *env) {
		// The contract lets a store either refuse this (the key is absent)
		// or accept it (nobody else claimed the key); both must be coherent.
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, e.short(), store.Acquired)
		e.lapse(e.short())
		err := e.complete("k", tok, []byte("late"), long)
		switch {
		case err == nil:
			e.wantCompleted("k", "fp", tok, []byte("late"))
		case errors.Is(err, store.ErrLeaseLost):
			e.wantAbsent("k", "after a lapsed lease and a refused Complete")
		default:
			e.Fatalf("Complete after the lease lapsed: %v, want nil or store.ErrLeaseLost", err)
		}
	}},
	{"Responses", func(e *env) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<12) // 64 KiB; Strings/ResponseSeveralMiB has a large one
		for i, resp := range [][]byte{nil, {}, {0, 1, 2, 0xff, 0xfe, 0}, []byte("\r\n\"'\\%_"), big} {
			key := "k" + itoa(i)
			tok := store.NewToken()
			e.claimWant(key, "fp", tok, long, store.Acquired)
			e.mustComplete(key, tok, resp, long)
			e.wantCompleted(key, "fp", tok, resp)
			c := e.claimWant(key, "fp", store.NewToken(), long, store.Completed)
			e.checkCompleted("replay of a "+itoa(len(resp))+"-byte response", c.Record, "fp", tok, resp)
		}
	}},
	{"ResponseIsCopied", func(e *env) {
		tok := store.NewToken()
		resp := []byte("original")
		e.claimWant("k", "fp", tok, long, store.Acquired)
		e.mustComplete("k", tok, resp, long)
		copy(resp, "MUTATED!")
		r := e.wantCompleted("k", "fp", tok, []byte("original"))
		if len(r.Response) > 0 {
			r.Response[0] = 'X'
		}
		c := e.claimWant("k", "fp", store.NewToken(), long, store.Completed)
		if len(c.Record.Response) > 0 {
			c.Record.Response[1] = 'X'
		}
		e.wantCompleted("k", "fp", tok, []byte("original"))
	}},
}
