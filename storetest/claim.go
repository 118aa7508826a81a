package storetest

import (
	"bytes"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/store"
)

var claimCases = []testCase{
	{"Absent", func(e *env) {
		tok := store.NewToken()
		before := e.now()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wantNear("LockedUntil after Claim", c.Record.LockedUntil, before.Add(long))
		r := e.wantInProgress("k", "fp", tok)
		e.wantSame("Get's LockedUntil (the one Claim returned)", r.LockedUntil, c.Record.LockedUntil)
	}},
	{"EmptyFingerprint", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "", t1, long, store.Acquired)
		e.claimWant("k", "", t2, long, store.InProgress)
		e.claimWant("k", "fp", t2, long, store.Mismatch)
	}},
	{"Reentrant", func(e *env) {
		tok := store.NewToken()
		// The gap is long enough to tell a renewal from jitter.
		first := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wait(e.gap())
		before := e.now()
		again := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wantMoved("re-entrant Claim's LockedUntil", again.Record.LockedUntil, first.Record.LockedUntil, e.gap())
		e.wantNear("LockedUntil after renewal", again.Record.LockedUntil, before.Add(long))
		r := e.wantInProgress("k", "fp", tok)
		e.wantMoved("Get's LockedUntil after the renewal", r.LockedUntil, first.Record.LockedUntil, e.gap())
	}},
	{"InProgressOtherToken", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		first := e.claimWant("k", "fp", t1, long, store.Acquired)
		e.wait(e.gap()) // so that a lease moved by the other Claim shows
		c := e.claimWant("k", "fp", t2, long, store.InProgress)
		e.checkInProgress("InProgress result", c.Record, "fp", t1)
		e.wantSame("InProgress result's LockedUntil (the holder's)", c.Record.LockedUntil, first.Record.LockedUntil)
		r := e.wantInProgress("k", "fp", t1)
		e.wantSame("the holder's LockedUntil after another token's Claim", r.LockedUntil, first.Record.LockedUntil)
	}},
	{"CompletedReplay", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		resp := []byte(`{"id":1}`)
		e.claimWant("k", "fp", t1, long, store.Acquired)
		e.mustComplete("k", t1, resp, long)
		r := e.wantCompleted("k", "fp", t1, resp)
		c := e.claimWant("k", "fp", t2, long, store.Completed)
		e.checkCompleted("Completed result", c.Record, "fp", t1, resp)
		// The replayed record is the stored one, deadline included: a
		// caller may send its ExpiresAt on as a cache lifetime.
		e.wantSame("the replayed record's ExpiresAt (Get's)", c.Record.ExpiresAt, r.ExpiresAt)
		c = e.claimWant("k", "fp", t1, long, store.Completed)
		e.checkCompleted("Completed result for the completing token", c.Record, "fp", t1, resp)
		e.wantSame("the replayed record's ExpiresAt for the completing token (Get's)", c.Record.ExpiresAt, r.ExpiresAt)
		e.wantCompleted("k", "fp", t1, resp)
	}},
	{"MismatchInProgress", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp1", t1, long, store.Acquired)
		c := e.claimWant("k", "fp2", t2, long, store.Mismatch)
		if c.Record.Fingerprint != "fp1" {
			e.Errorf("Mismatch result: Fingerprint = %q, want the stored %q", c.Record.Fingerprint, "fp1")
		}
		e.claimWant("k", "fp2", t1, long, store.Mismatch)
		e.wantInProgress("k", "fp1", t1)
	}},
	{"MismatchCompleted", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp1", t1, long, store.Acquired)
		e.mustComplete("k", t1, []byte("r"), long)
		e.claimWant("k", "fp2", t2, long, store.Mismatch)
		e.claimWant("k", "fp2", t1, long, store.Mismatch)
		e.wantCompleted("k", "fp1", t1, []byte("r"))
	}},
	{"AfterRelease", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp1", t1, long, store.Acquired)
		e.mustRelease("k", t1)
		e.claimWant("k", "fp2", t2, long, store.Acquired)
		e.wantInProgress("k", "fp2", t2)
	}},
	{"LeaseLapsedTakeover", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp1", t1, e.short(), store.Acquired)
		e.lapse(e.short())
		e.claimWant("k", "fp2", t2, long, store.Acquired)
		e.wantInProgress("k", "fp2", t2)
	}},
	{"LapsedLeaseSameToken", func(e *env) {
		tok := store.NewToken()
		e.claimWant("k", "fp", tok, e.short(), store.Acquired)
		e.lapse(e.short())
		before := e.now()
		c := e.claimWant("k", "fp", tok, long, store.Acquired)
		e.wantNear("LockedUntil after re-claiming a lapsed lease", c.Record.LockedUntil, before.Add(long))
	}},
	{"RetentionOver", func(e *env) {
		t1, t2 := store.NewToken(), store.NewToken()
		e.claimWant("k", "fp1", t1, long, store.Acquired)
		e.mustComplete("k", t1, []byte("old"), e.short())
		e.lapse(e.short())
		e.claimWant("k", "fp2", t2, long, store.Acquired)
		e.wantInProgress("k", "fp2", t2)
	}},
	{"KeysIndependent", func(e *env) {
		keys := []string{"a", "a:", "A", ":a", "a\u00e9", "\u00e9a", "a b", "a/b", strings.Repeat("x", e.h.MaxKeyLen)}
		toks := tokens(len(keys))
		for i, k := range keys {
			e.claimWant(k, "fp", toks[i], long, store.Acquired)
		}
		for i, k := range keys {
			e.wantInProgress(k, "fp", toks[i])
		}
		e.mustComplete(keys[0], toks[0], []byte("only a"), long)
		e.wantInProgress(keys[1], "fp", toks[1])
	}},
	{"ConcurrentSameKey", func(e *env) { concurrentClaims(e, false) }},
	{"ConcurrentWithComplete", func(e *env) { concurrentClaims(e, true) }},
}

// concurrentClaims races goroutinesPerKey Claims with distinct tokens on each
// of numKeys fresh keys and checks that exactly one wins each key. With
// complete set, the winner completes at once, so losers may also see Completed.
func concurrentClaims(e *env, complete bool) {
	const numKeys, goroutinesPerKey = 16, 64
	type result struct {
		key string
		tok store.Token
		c   store.Claim
		err error
	}
	results := make(chan result, numKeys*goroutinesPerKey)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := 0; k < numKeys; k++ {
		key := "race-" + itoa(k)
		for _, tok := range tokens(goroutinesPerKey) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := e.s.Claim(e.ctx, key, "fp", tok, long)
				if err == nil && complete && c.Outcome == store.Acquired {
					err = e.s.Complete(e.ctx, key, tok, []byte("by "+string(tok)), long)
				}
				results <- result{key, tok, c, err}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(results)

	winners := map[string]store.Token{}
	var all []result
	for r := range results {
		if r.err != nil {
			e.Fatalf("concurrent Claim(%q) by %s: %v", r.key, r.tok, r.err)
		}
		all = append(all, r)
		if r.c.Outcome == store.Acquired {
			if w, dup := winners[r.key]; dup {
				e.Fatalf("Claim is not atomic: both %s and %s acquired %q", w, r.tok, r.key)
			}
			winners[r.key] = r.tok
		}
	}
	if len(winners) != numKeys {
		e.Fatalf("%d of %d keys had a winner, want every key to have exactly one", len(winners), numKeys)
	}
	for _, r := range all {
		w := winners[r.key]
		switch r.c.Outcome {
		case store.Acquired:
		case store.InProgress:
			if r.c.Record.Token != w {
				e.Errorf("loser of %q saw InProgress held by %s, but %s won", r.key, r.c.Record.Token, w)
			}
		case store.Completed:
			if !complete {
				e.Errorf("loser of %q saw Completed, but nobody completed it", r.key)
			} else if r.c.Record.Token != w || !bytes.Equal(r.c.Record.Response, []byte("by "+string(w))) {
				e.Errorf("loser of %q saw Completed %s, want the winner %s's response", r.key, describe(r.c.Record), w)
			}
		default:
			e.Errorf("loser of %q saw outcome %v, want InProgress or Completed", r.key, r.c.Outcome)
		}
	}
	for key, w := range winners {
		if complete {
			e.wantCompleted(key, "fp", w, []byte("by "+string(w)))
		} else {
			e.wantInProgress(key, "fp", w)
		}
	}
}
