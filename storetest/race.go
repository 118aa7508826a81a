package storetest

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idemkit/store"
)

// The cases in this file race real goroutines against keys in every state a
// takeover can start from, because a store whose takeover of a dead record is
// a read followed by a separate write passes every case that races only
// fresh keys. Each prepares many keys, lets their leases or retentions run
// out once (one sleep on the real clock), then races them all at once.

// raceKeys is how many keys each race case prepares; raceClaimers is how
// many goroutines claim each key at once.
const (
	raceKeys     = 16
	raceClaimers = 16
)

func raceKeyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + "-" + itoa(i)
	}
	return keys
}

// concurrentClaimsOver prepares raceKeys keys with prepare, then has
// raceClaimers goroutines with distinct tokens claim each key at once, and
// checks that exactly one acquires it and that every loser sees the winner
// holding it.
func concurrentClaimsOver(e *env, what string, prepare func(keys []string)) {
	keys := raceKeyNames("over", raceKeys)
	prepare(keys)
	type result struct {
		key string
		tok store.Token
		c   store.Claim
		err error
	}
	results := make(chan result, raceKeys*raceClaimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, key := range keys {
		for _, tok := range tokens(raceClaimers) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := e.s.Claim(e.ctx, key, "fp", tok, long)
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
			e.Fatalf("concurrent Claim(%q) %s by %s: %v", r.key, what, r.tok, r.err)
		}
		all = append(all, r)
		if r.c.Outcome == store.Acquired {
			if w, dup := winners[r.key]; dup {
				e.Fatalf("Claim %s is not atomic: both %s and %s acquired %q (a takeover must not be a read followed by a separate write)", what, w, r.tok, r.key)
			}
			winners[r.key] = r.tok
		}
	}
	if len(winners) != len(keys) {
		e.Fatalf("%d of %d keys %s had a winner, want every key to have exactly one", len(winners), len(keys), what)
	}
	for _, r := range all {
		if r.c.Outcome == store.Acquired {
			continue
		}
		if w := winners[r.key]; r.c.Outcome != store.InProgress || r.c.Record.Token != w {
			e.Errorf("loser of %q %s saw %v %s, want in progress held by the winner %s", r.key, what, r.c.Outcome, describe(r.c.Record), w)
		}
	}
	for key, w := range winners {
		e.wantInProgress(key, "fp", w)
	}
}

var raceClaimCases = []testCase{
	{"ConcurrentLapsedLease", func(e *env) {
		concurrentClaimsOver(e, "over a lapsed lease", func(keys []string) {
			for _, k := range keys {
				e.claimWant(k, "old-fp", store.NewToken(), e.short(), store.Acquired)
			}
			e.lapse(e.short())
		})
	}},
	{"ConcurrentRetentionOver", func(e *env) {
		concurrentClaimsOver(e, "over a completed record past its retention", func(keys []string) {
			for _, k := range keys {
				tok := store.NewToken()
				e.claimWant(k, "old-fp", tok, long, store.Acquired)
				e.mustComplete(k, tok, []byte("old"), e.short())
			}
			e.lapse(e.short())
		})
	}},
	{"ConcurrentAfterRelease", func(e *env) {
		concurrentClaimsOver(e, "after a Release", func(keys []string) {
			for _, k := range keys {
				tok := store.NewToken()
				e.claimWant(k, "old-fp", tok, long, store.Acquired)
				e.mustRelease(k, tok)
			}
		})
	}},
}

// staleRounds is how many times the stale-holder races run over raceKeys
// keys each: more with a manual clock, where a round costs no sleep.
func (e *env) staleRounds() int {
	if e.clock != nil {
		return 4
	}
	return 1
}

// raceStale gives raceKeys keys each to an old holder whose lease then
// lapses, and races, per key, the old holder's stale call against a new
// token's Claim; check judges each key's outcome.
func raceStale(e *env, stale func(key string, old store.Token) error,
	check func(key string, old, cur store.Token, staleErr error, c store.Claim)) {
	for round := 0; round < e.staleRounds(); round++ {
		keys := raceKeyNames("stale-"+itoa(round), raceKeys)
		olds, curs := tokens(len(keys)), tokens(len(keys))
		for i, k := range keys {
			e.claimWant(k, "fp", olds[i], e.short(), store.Acquired)
		}
		e.lapse(e.short())
		staleErrs := make([]error, len(keys))
		claims := make([]store.Claim, len(keys))
		claimErrs := make([]error, len(keys))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				staleErrs[i] = stale(k, olds[i])
			}()
			go func() {
				defer wg.Done()
				<-start
				claims[i], claimErrs[i] = e.s.Claim(e.ctx, k, "fp", curs[i], long)
			}()
		}
		close(start)
		wg.Wait()
		for i, k := range keys {
			if claimErrs[i] != nil {
				e.Fatalf("Claim(%q) racing the old holder: %v", k, claimErrs[i])
			}
			check(k, olds[i], curs[i], staleErrs[i], claims[i])
		}
	}
}

var raceFencingCases = []testCase{
	{"StaleCompleteRacesTakeover", func(e *env) {
		// Either the stale Complete ran first on the lapsed lease and was
		// accepted (the contract allows it while nobody else claimed), and
		// the new Claim replays it; or the takeover ran first, and the
		// stale Complete must fail and leave the new holder untouched.
		raceStale(e, func(k string, old store.Token) error {
			return e.s.Complete(e.ctx, k, old, []byte("stale"), long)
		}, func(k string, old, cur store.Token, staleErr error, c store.Claim) {
			switch {
			case staleErr == nil && c.Outcome == store.Completed:
				e.checkCompleted("the new Claim after the accepted stale Complete", c.Record, "fp", old, []byte("stale"))
				e.wantCompleted(k, "fp", old, []byte("stale"))
			case errors.Is(staleErr, store.ErrLeaseLost) && c.Outcome == store.Acquired:
				r := e.wantInProgress(k, "fp", cur)
				e.wantSame("the new holder's LockedUntil after the stale Complete", r.LockedUntil, c.Record.LockedUntil)
			default:
				r, err := e.s.Get(e.ctx, k)
				e.Fatalf("stale Complete(%q) by the lapsed holder raced a takeover: Complete returned %v, the new Claim %v; "+
					"the record is now %s (Get error %v); want either the Complete accepted and replayed, or refused with the new holder untouched",
					k, staleErr, c.Outcome, describe(r), err)
			}
		})
	}},
	{"StaleReleaseRacesTakeover", func(e *env) {
		// The key is absent once the lease lapsed, so the new Claim
		// acquires it whatever the order, and the stale Release (nil either
		// way) must never delete the new holder's claim.
		raceStale(e, func(k string, old store.Token) error {
			return e.s.Release(e.ctx, k, old)
		}, func(k string, old, cur store.Token, staleErr error, c store.Claim) {
			if staleErr != nil {
				e.Fatalf("stale Release(%q) racing a takeover: %v, want nil", k, staleErr)
			}
			if c.Outcome != store.Acquired {
				e.Fatalf("Claim(%q) of a lapsed key racing the old holder's Release: %v, want acquired", k, c.Outcome)
			}
			r, err := e.s.Get(e.ctx, k)
			if err != nil || r.Status != store.StatusInProgress || r.Token != cur {
				e.Fatalf("after the lapsed holder's Release raced a takeover of %q: Get = %s, %v; want in progress held by the new holder %s", k, describe(r), err, cur)
			}
		})
	}},
}

var raceGetCases = []testCase{
	{"ConcurrentWithWrites", getConcurrentWithWrites},
}

// getConcurrentWithWrites is Get/ConcurrentWithWrites, and its rule: Get is
// safe for concurrent use with writes to the same key and returns one whole
// record, never fields of two generations (a crash of the runtime's
// concurrent map check shows this function in its stack).
//
// Writers cycle their keys through claim, release, claim and complete, each
// generation with its own token and a fingerprint and response made from
// it; readers Get the key each writer is on. A writer lingers after each
// Claim until a reader has begun a Get of its key, and then moves on to
// the next generation, so a Get that reads a record in two steps is torn
// on every run: the fingerprint of one generation, the token or response
// of the next.
func getConcurrentWithWrites(e *env) {
	const writers, cycles, readers, reads = 4, 20, 4, 64
	var wg sync.WaitGroup
	errs := make(chan string, writers+readers)
	start := make(chan struct{})
	cur := make([]atomic.Pointer[string], writers) // the key each writer is on
	begun := make([]atomic.Int64, writers)         // Gets begun on each writer's keys
	for w := range cur {
		k := "rw-" + itoa(w) + "-0"
		cur[w].Store(&k)
	}
	// Readers go on until every writer is done, and writers start only
	// once every reader has read once, so reads and writes overlap
	// however the goroutines are scheduled.
	var writing atomic.Int32
	writing.Store(writers)
	var readersIn sync.WaitGroup
	readersIn.Add(readers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			<-start
			readersIn.Wait()
			gen := 0
			for i := 0; i < cycles; i++ {
				k := *cur[w].Load()
				tok := store.NewToken()
				c, err := e.s.Claim(e.ctx, k, "fp-"+string(tok), tok, long)
				if err != nil || c.Outcome != store.Acquired {
					errs <- "writer Claim(" + qs(k) + "): " + c.Outcome.String() + " " + errString(err)
					return
				}
				// Linger until a reader begins a Get on this generation
				// (bounded, in case every reader has stopped).
				for seen, j := begun[w].Load(), 0; begun[w].Load() == seen && j < 1000; j++ {
					runtime.Gosched()
				}
				if i%2 == 0 {
					err = e.s.Release(e.ctx, k, tok)
				} else if err = e.s.Complete(e.ctx, k, tok, []byte("by "+string(tok)), long); err == nil {
					// A completed record stays: the next generation is
					// on a key of its own.
					gen++
					next := "rw-" + itoa(w) + "-" + itoa(gen)
					cur[w].Store(&next)
				}
				if err != nil {
					errs <- "writer on " + qs(k) + ": " + err.Error()
					return
				}
			}
		}()
	}
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := false
			defer func() {
				if !in {
					readersIn.Done() // failed on its first read: let the writers go
				}
			}()
			<-start
			for i := 0; i < reads || writing.Load() > 0; i++ {
				if i == 1 {
					in = true
					readersIn.Done()
				}
				w := (r + i) % writers
				begun[w].Add(1)
				k := *cur[w].Load()
				if i%8 == 7 { // now and then a generation already completed
					k = "rw-" + itoa(w) + "-" + itoa(i%3)
				}
				rec, err := e.s.Get(e.ctx, k)
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					errs <- "Get(" + qs(k) + "): " + err.Error()
					return
				case rec.Key != k || rec.Token == "" || rec.Fingerprint != "fp-"+string(rec.Token),
					rec.Status == store.StatusInProgress && len(rec.Response) != 0,
					rec.Status == store.StatusCompleted && !bytes.Equal(rec.Response, []byte("by "+string(rec.Token))),
					rec.Status != store.StatusInProgress && rec.Status != store.StatusCompleted:
					errs <- "Get(" + qs(k) + ") during writes: a torn record " + describe(rec) +
						" (each generation's fingerprint is fp- and its response by followed by its token)"
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for msg := range errs {
		e.Error(msg)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
