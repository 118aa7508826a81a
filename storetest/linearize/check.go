package linearize

import (
	"math"
	"slices"

	"github.com/idemkit/idemkit/store"
)

// never is the return time of a call whose outcome the caller never learnt
// (a lost reply, a timeout): it may take effect at any time after it was
// called, or not at all.
const never = math.MaxInt64

// kind is which Store method a call was.
type kind uint8

const (
	claimCall kind = iota + 1
	completeCall
	releaseCall
	getCall
	renewCall
)

// rec is the part of a store.Record the model predicts: its deadlines are
// not, since no lease or retention runs out during a history.
type rec struct {
	status store.Status // 0: absent
	tok    store.Token
	fp     string
	resp   string
}

// output is what a call returned, when the caller learnt it.
type output struct {
	outcome  store.Outcome // Claim
	leaseErr bool          // Complete, Renew: store.ErrLeaseLost
	notFound bool          // Get: store.ErrNotFound
	rec      rec           // Claim's and Get's record
}

// call is one call in a history, on one key.
type call struct {
	client int
	kind   kind
	fp     string      // Claim
	tok    store.Token // Claim, Complete, Release, Renew
	resp   string      // Complete
	begin  int64       // ns since the history began, when it was called
	end    int64       // when it returned, or never
	out    output      // valid when end != never
	fault  string      // why the outcome is unknown: "lost reply", "timed out", ...
}

func (c call) known() bool { return c.end != never }

// step applies c to the state of its key, as the contract's table says,
// and reports whether the output c's caller saw agrees (any output does
// when the caller saw none).
func step(s rec, c call) (rec, bool) {
	var want output
	next := s
	switch c.kind {
	case claimCall:
		switch {
		case s.status == 0, s.status == store.StatusInProgress && s.tok == c.tok && s.fp == c.fp:
			next = rec{status: store.StatusInProgress, tok: c.tok, fp: c.fp}
			want = output{outcome: store.Acquired, rec: next}
		case s.fp != c.fp:
			want = output{outcome: store.Mismatch, rec: s}
		case s.status == store.StatusCompleted:
			want = output{outcome: store.Completed, rec: s}
		default:
			want = output{outcome: store.InProgress, rec: s}
		}
	case completeCall:
		switch {
		case s.status == store.StatusInProgress && s.tok == c.tok:
			next = rec{status: store.StatusCompleted, tok: c.tok, fp: s.fp, resp: c.resp}
		case s.status == store.StatusCompleted && s.tok == c.tok:
			// A retried Complete: nil, and the first response stays.
		default:
			want.leaseErr = true
		}
	case releaseCall:
		if s.status == store.StatusInProgress && s.tok == c.tok {
			next = rec{}
		}
	case getCall:
		if s.status == 0 {
			want.notFound = true
		} else {
			want.rec = s
		}
	case renewCall:
		// The model has no deadlines: a renewal of the token's lease
		// changes nothing it predicts, and any other is refused.
		want.leaseErr = s.status != store.StatusInProgress || s.tok != c.tok
	}
	return next, !c.known() || c.out == want
}

// readOnly reports whether c, as its caller saw it, changed nothing: such
// a call can be left out of a history that has no order without giving it
// one, which is how a failing history is shrunk.
func readOnly(c call) bool {
	switch {
	case c.kind == getCall:
		return true
	case !c.known():
		return false
	case c.kind == claimCall:
		return c.out.outcome != store.Acquired
	case c.kind == completeCall, c.kind == renewCall:
		return c.out.leaseErr
	}
	return false
}

// searchLimit bounds the states one check visits; a history that needs more
// is reported as undecided rather than searched for ever.
const searchLimit = 500_000

// linearizable reports whether the calls on one key have an order that
// agrees with each call's real-time bounds and with the model, by Wing and
// Gong's search with Lowe's memoisation of (calls placed, state) pairs. A
// call whose outcome is unknown may be placed anywhere after its begin or
// left out. decided is false when the search gave up at searchLimit.
func linearizable(calls []call) (ok, decided bool) {
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b call) int { return cmpInt(a.begin, b.begin) })
	n := len(calls)
	placed := make([]uint64, (n+63)/64)
	seen := map[string]bool{}
	visits := 0
	var search func(s rec, left int) bool
	search = func(s rec, left int) bool {
		if left == 0 {
			return true
		}
		visits++
		if visits > searchLimit {
			return false
		}
		memo := memoKey(placed, s)
		if seen[memo] {
			return false
		}
		// The earliest return among the calls not placed yet: any call
		// that began after it cannot come next.
		first := int64(never)
		for i := range calls {
			if placed[i/64]&(1<<(i%64)) == 0 && calls[i].end < first {
				first = calls[i].end
			}
		}
		if first == never {
			return true // only unknown outcomes are left: they may never have happened
		}
		for i := range calls {
			if placed[i/64]&(1<<(i%64)) != 0 {
				continue
			}
			if calls[i].begin > first {
				break // sorted by begin
			}
			next, agrees := step(s, calls[i])
			if !agrees {
				continue
			}
			placed[i/64] |= 1 << (i % 64)
			done := search(next, left-1)
			placed[i/64] &^= 1 << (i % 64)
			if done {
				return true
			}
		}
		seen[memo] = true
		return false
	}
	ok = search(rec{}, n)
	return ok, ok || visits <= searchLimit
}

func memoKey(placed []uint64, s rec) string {
	b := make([]byte, 0, len(placed)*8+len(s.tok)+len(s.fp)+len(s.resp)+4)
	for _, w := range placed {
		for i := range 8 {
			b = append(b, byte(w>>(8*i)))
		}
	}
	b = append(b, byte(s.status), 0)
	b = append(b, s.tok...)
	b = append(b, 0)
	b = append(b, s.fp...)
	b = append(b, 0)
	b = append(b, s.resp...)
	return string(b)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// prefixAt returns the history as it stood at time t: the calls begun by
// then, with the outcome of those that had not returned yet unknown. If a
// history's prefix has no order, the history has none either.
func prefixAt(calls []call, t int64) []call {
	var p []call
	for _, c := range calls {
		if c.begin > t {
			continue
		}
		if c.end > t && c.known() {
			c.end, c.out, c.fault = never, output{}, "had not returned yet"
		}
		p = append(p, c)
	}
	return p
}

// shrink returns a shortest history it can find that still has no order:
// the shortest prefix (cut when a call returned), then without the calls
// that changed nothing, one at a time, while it still has none. Both steps
// keep it a history with no order: a prefix of a linearizable history is
// linearizable, and so is a linearizable history without a call that
// changed nothing.
func shrink(calls []call) []call {
	var ends []int64
	for _, c := range calls {
		if c.known() {
			ends = append(ends, c.end)
		}
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	h := calls
	// The shortest failing prefix ends at one of ends[lo:hi+1].
	for lo, hi := 0, len(ends)-1; lo <= hi; {
		mid := (lo + hi) / 2
		p := prefixAt(calls, ends[mid])
		if ok, decided := linearizable(p); ok || !decided {
			lo = mid + 1
		} else {
			h, hi = p, mid-1
		}
	}
	// A Get whose reply never came constrains nothing.
	h = slices.DeleteFunc(slices.Clone(h), func(c call) bool { return c.kind == getCall && !c.known() })
	for i := 0; i < len(h); {
		if !readOnly(h[i]) {
			i++
			continue
		}
		shorter := slices.Delete(slices.Clone(h), i, i+1)
		if ok, decided := linearizable(shorter); !ok && decided {
			h = shorter
			continue
		}
		i++
	}
	slices.SortStableFunc(h, func(a, b call) int { return cmpInt(a.begin, b.begin) })
	return h
}
