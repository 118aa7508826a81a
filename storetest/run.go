package storetest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// group is a named list of cases; Run makes each one a subtest Group/Case.
type group struct {
	name  string
	cases []testCase
}

type testCase struct {
	name string
	run  func(e *env)
}

func groups() []group {
	return []group{
		{"Claim", concat(claimCases, raceClaimCases)},
		{"Complete", completeCases},
		{"Release", releaseCases},
		{"Renew", renewCases},
		{"Attempts", attemptCases},
		{"Get", concat(getCases, raceGetCases)},
		{"Fencing", concat(fencingCases, raceFencingCases)},
		{"Expiry", expiryCases},
		{"Strings", stringsCases},
		{"Errors", errorCases},
		{"Purger", purgerCases},
		{"Inspector", inspectorCases},
		{"Transactor", concat(transactorCases, transactorPromiseCases)},
		{"Model", modelCases},
	}
}

func concat(lists ...[]testCase) []testCase {
	var all []testCase
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// Run runs the conformance suite against the stores h makes. Each case is a
// subtest named Group/Case (for example Claim/ConcurrentSameKey) with a
// fresh store from h.New and a watchdog (see Harness.Timeout). Cases for the
// optional interfaces store.Purger, store.Inspector and store.Transactor skip themselves when
// the store does not implement them.
func Run(t *testing.T, h Harness) {
	t.Helper()
	runGroups(t, h, groups())
}

func runGroups(t *testing.T, h Harness, groups []group) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	h = h.withDefaults()
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					ctx := watchdog(t, h.Timeout)
					sub := h.New(t)
					if sub.Store == nil {
						t.Fatal("storetest: Harness.New returned a Subject without a Store")
					}
					c.run(&env{T: t, h: h, s: sub.Store, sub: sub, clock: sub.Clock, ctx: ctx})
				})
			}
		})
	}
}

// watchdog returns a context for the store calls of one subtest. If the
// subtest is still running after timeout, it is marked failed and the context
// is cancelled; if it is still running 5s after that, the backend ignored its
// context (a deadlock), and the watchdog prints every goroutine's stack and
// panics, naming the subtest, rather than let the test binary hang.
func watchdog(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		finished bool
		second   *time.Timer
	)
	name := t.Name()
	first := time.AfterFunc(timeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		t.Errorf("storetest: watchdog: %s still running after %v; cancelling its context", name, timeout)
		cancel()
		second = time.AfterFunc(5*time.Second, func() {
			mu.Lock()
			defer mu.Unlock()
			if finished {
				return
			}
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "%s\n", buf)
			panic(fmt.Sprintf("storetest: watchdog: %s deadlocked: still running %v after its context was cancelled", name, 5*time.Second))
		})
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		finished = true
		first.Stop()
		if second != nil {
			second.Stop()
		}
		cancel()
	})
	return ctx
}

// env is what one case works with: its subtest, the harness, a fresh store,
// that store's clock (nil for the real clock) and the watchdog's context.
type env struct {
	*testing.T
	h     Harness
	s     store.Store
	sub   Subject // the subject s came from, with its hooks
	clock Clock
	ctx   context.Context
}

// Durations the cases use. long is a lease or retention that never runs out
// during a case; short is one that the case waits out with lapse.
const long = 10 * time.Minute

func (e *env) short() time.Duration {
	if e.clock != nil {
		return 30 * time.Second
	}
	return e.h.ShortLease
}

// now returns the time the store sees.
func (e *env) now() time.Time {
	if e.clock != nil {
		return e.clock.Now()
	}
	return time.Now()
}

// lapse lets d (a lease or retention that began just now) run out: it
// advances the clock, or sleeps on the real clock with a margin.
func (e *env) lapse(d time.Duration) {
	e.Helper()
	if e.clock != nil {
		e.clock.Advance(d + e.h.Tolerance)
		return
	}
	time.Sleep(d + d/2 + 50*time.Millisecond)
}

// gap is a pause long enough for a renewed lease to end visibly later than
// the first, and for a deadline that moved to be told from jitter: several
// tolerances on a manual clock; on the real one 50ms, or ten times
// Harness.Jitter when that is longer.
func (e *env) gap() time.Duration {
	if e.clock != nil {
		return 3 * e.h.Tolerance
	}
	return max(50*time.Millisecond, 10*e.h.Jitter)
}

// wait lets d pass without the margin lapse adds.
func (e *env) wait(d time.Duration) {
	if e.clock != nil {
		e.clock.Advance(d)
		return
	}
	time.Sleep(d)
}
