package linearize

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Harness tells Run how to make the store under test. It is a struct so
// that fields added later do not break existing harnesses; only New is
// required.
type Harness struct {
	// New returns a fresh, empty store, isolated from every other store New
	// returns, as storetest.Harness.New does. Run calls it once.
	New func(t *testing.T) store.Store

	// Budget is about how long Run spends producing histories; it stops at
	// the first history with no order. Default 2s.
	Budget time.Duration

	// Clients is how many goroutines call the store at once. Default 8.
	Clients int
}

// Sizes of one round: its keys, and the requests each client makes.
const (
	roundKeys     = 3
	roundRequests = 8
	maxRounds     = 200
	lease         = time.Hour // no lease or retention runs out during a history
)

func (h Harness) withDefaults() Harness {
	if h.Budget <= 0 {
		h.Budget = 2 * time.Second
	}
	if h.Clients <= 0 {
		h.Clients = 8
	}
	return h
}

// Run checks that the store h.New makes is linearizable under faults: many
// goroutines make requests as idemkit does (Claim, then Complete or Release,
// with Get, Renew heartbeats and re-entrant Claims between), through a wrapper
// that loses replies of calls that took effect, abandons calls at a timeout
// while they go on, and gives calls deadlines that may cut them short; a
// caller who saw no outcome retries with the same token. Each round's
// history is checked, key by key, against the contract's table: there must
// be an order of the calls, each placed between its call and its return (a
// call whose outcome was never seen anywhere after its call, or nowhere),
// that the table explains. A failure prints the shortest history found that
// has no such order.
//
// No lease or retention runs out during a round: leases last an hour, and a
// store's clock is never moved. STORETEST_SEED replays a run's requests
// (not its scheduling).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("linearize: Harness.New is nil")
	}
	h = h.withDefaults()
	s := h.New(t)
	if s == nil {
		t.Fatal("linearize: Harness.New returned a nil Store")
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("STORETEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	rounds, calls, undecided, report := check(t.Context(), s, h, seed)
	if report != "" {
		t.Fatal(report)
	}
	t.Logf("linearize: %d rounds, %d calls, each key's history has an order the contract allows (%d too long to decide; seed %d)", rounds, calls, undecided, seed)
}

// check runs rounds until the budget is spent or a history has no order,
// and returns the failure's report ("" if none).
func check(ctx context.Context, s store.Store, h Harness, seed uint64) (rounds, calls, undecided int, report string) {
	deadline := time.Now().Add(h.Budget)
	for round := 0; round < maxRounds && time.Now().Before(deadline); round++ {
		rounds++
		hist, err := runRound(ctx, s, h.Clients, seed, round)
		if err != nil {
			return rounds, calls, undecided, "linearize: " + err.Error()
		}
		var failing [][]call
		var failingKey []string
		for _, key := range slices.Sorted(maps.Keys(hist)) {
			calls += len(hist[key])
			ok, decided := linearizable(hist[key])
			switch {
			case !decided:
				undecided++
			case !ok:
				failing = append(failing, hist[key])
				failingKey = append(failingKey, key)
			}
		}
		if len(failing) == 0 {
			continue
		}
		best, bestKey := []call(nil), ""
		for i, f := range failing {
			if sh := shrink(f); best == nil || len(sh) < len(best) {
				best, bestKey = sh, failingKey[i]
			}
		}
		return rounds, calls, undecided, describe(bestKey, best, len(failing), seed, round)
	}
	return rounds, calls, undecided, ""
}

// recorder collects one round's calls, by key.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	calls map[string][]call
	bad   []string // calls that failed in a way no fault explains
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(key string, c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[key] = append(r.calls[key], c)
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = append(r.bad, msg)
}

// runRound has clients goroutines make roundRequests requests each on
// roundKeys fresh keys, and returns every call, by key.
func runRound(ctx context.Context, s store.Store, clients int, seed uint64, round int) (map[string][]call, error) {
	rec := &recorder{start: time.Now(), calls: map[string][]call{}}
	keys := make([]string, roundKeys)
	for i := range keys {
		keys[i] = "lin-" + strconv.FormatUint(seed%1e6, 10) + "-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
	}
	var wg, abandoned sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &client{id: c, s: s, rec: rec, ctx: ctx, abandoned: &abandoned,
				rng: rand.New(rand.NewPCG(seed, uint64(round)<<16|uint64(c)))}
			<-start
			for j := range roundRequests {
				cl.request(keys[cl.rng.IntN(len(keys))], j)
			}
		}()
	}
	close(start)
	wg.Wait()
	abandoned.Wait() // calls given up on at a timeout, still running
	if len(rec.bad) > 0 {
		return nil, errors.New(strings.Join(rec.bad, "\n"))
	}
	return rec.calls, nil
}

// client is one goroutine making requests, and the faults between it and
// the store.
type client struct {
	id        int
	s         store.Store
	rec       *recorder
	ctx       context.Context
	rng       *rand.Rand
	abandoned *sync.WaitGroup
	mu        sync.Mutex // guards rng between the request and its heartbeat
}

func (cl *client) intn(n int) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rng.IntN(n)
}

// request is one request as idemkit makes it: claim the key; when
// acquired, maybe look, then complete or release it (a heartbeat's Renew,
// or a re-entrant Claim, racing either); otherwise maybe look, and maybe
// try a Release that must change nothing.
func (cl *client) request(key string, j int) {
	fp := "fpA"
	if cl.intn(8) == 0 {
		fp = "fpB"
	}
	tok := store.Token("c" + strconv.Itoa(cl.id) + "." + strconv.Itoa(j))
	c := cl.retry(key, call{kind: claimCall, fp: fp, tok: tok})
	acquired := c.known() && c.out.outcome == store.Acquired
	if !acquired && c.known() {
		if cl.intn(3) == 0 {
			cl.retry(key, call{kind: getCall})
		}
		if cl.intn(4) == 0 {
			cl.retry(key, call{kind: releaseCall, tok: tok})
		}
		return
	}
	// Acquired, or the Claim's outcome is unknown: go on as the holder
	// would (when it is not, every call below must change nothing).
	var beat sync.WaitGroup
	switch cl.intn(6) {
	case 0: // a heartbeat, as the engine renews
		beat.Go(func() { cl.retry(key, call{kind: renewCall, tok: tok}) })
	case 1: // a re-entrant Claim, as a retry after a lost reply makes
		beat.Go(func() { cl.retry(key, call{kind: claimCall, fp: fp, tok: tok}) })
	}
	if cl.intn(3) == 0 {
		cl.retry(key, call{kind: getCall})
	}
	if cl.intn(4) == 0 {
		cl.retry(key, call{kind: releaseCall, tok: tok})
	} else {
		cl.retry(key, call{kind: completeCall, tok: tok, resp: "by " + string(tok)})
	}
	beat.Wait()
}

// retry makes c until its outcome is known, at most three times, and
// returns the last attempt. A retried Complete sends different bytes, as a
// response rebuilt by the retry may be: the first must stay.
func (cl *client) retry(key string, c call) call {
	resp := c.resp
	for attempt := 1; ; attempt++ {
		if c.kind == completeCall && attempt > 1 {
			c.resp = resp + " #" + strconv.Itoa(attempt)
		}
		done := cl.invoke(key, c)
		if done.known() || attempt == 3 {
			return done
		}
	}
}

// invoke makes one call through the faults and records it.
func (cl *client) invoke(key string, c call) call {
	c.client = cl.id
	fault := cl.intn(10)
	c.begin = cl.rec.now()
	switch {
	case fault == 0: // the call takes effect; its reply is lost
		cl.do(cl.ctx, key, c)
		c.end, c.fault = never, "lost reply"
	case fault == 1: // the caller gives up at a timeout; the call goes on
		res := make(chan call, 1)
		cl.abandoned.Add(1)
		go func(c call) {
			defer cl.abandoned.Done()
			res <- cl.do(cl.ctx, key, c)
		}(c)
		wait := time.Duration(cl.intn(200)) * time.Microsecond
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-res: // finished in time, but the caller still sees its timeout
			timer.Stop()
		}
		c.end, c.fault = never, "timed out after "+wait.String()+" (the call went on)"
	case fault == 2: // a deadline that may cut the call short
		d := time.Duration(cl.intn(500)) * time.Microsecond
		ctx, cancel := context.WithTimeout(cl.ctx, d)
		c = cl.do(ctx, key, c)
		cancel()
		if !c.known() {
			c.fault = "deadline of " + d.String() + ": " + c.fault
		}
	default:
		c = cl.do(cl.ctx, key, c)
	}
	cl.rec.add(key, c)
	return c
}

// do calls the store and returns c with its outcome: end is set when the
// call returned an outcome the contract defines, and left never with the
// error in fault otherwise.
func (cl *client) do(ctx context.Context, key string, c call) call {
	var err error
	switch c.kind {
	case claimCall:
		var r store.Claim
		r, err = cl.s.Claim(ctx, key, c.fp, c.tok, lease)
		c.out = output{outcome: r.Outcome, rec: recOf(r.Record)}
	case completeCall:
		err = cl.s.Complete(ctx, key, c.tok, []byte(c.resp), lease)
		if errors.Is(err, store.ErrLeaseLost) {
			c.out.leaseErr, err = true, nil
		}
	case releaseCall:
		err = cl.s.Release(ctx, key, c.tok)
	case renewCall:
		err = cl.s.Renew(ctx, key, c.tok, lease)
		if errors.Is(err, store.ErrLeaseLost) {
			c.out.leaseErr, err = true, nil
		}
	case getCall:
		var r store.Record
		r, err = cl.s.Get(ctx, key)
		c.out.rec = recOf(r)
		if errors.Is(err, store.ErrNotFound) {
			c.out, err = output{notFound: true}, nil
		}
	}
	switch {
	case err == nil:
		c.end = cl.rec.now()
	case errors.Is(err, store.ErrInvalid):
		cl.rec.fail(fmt.Sprintf("%s: %v (the check's own calls are valid)", c.String(key), err))
		c.end, c.out, c.fault = never, output{}, err.Error()
	default:
		c.end, c.out, c.fault = never, output{}, "error: "+err.Error()
	}
	runtime.Gosched()
	return c
}

func recOf(r store.Record) rec {
	return rec{status: r.Status, tok: r.Token, fp: r.Fingerprint, resp: string(r.Response)}
}
