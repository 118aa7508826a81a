package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The model-based case runs random sequences of Claim, Complete, Release,
// Renew, Get and (with a Clock) time steps by several tokens on a few keys, against the
// store and against a reference model of the contract table, and fails on the
// first divergence with the shortest sequence it can find that still diverges.
// Every operation is applied twice in a row now and then — a retry after a
// lost reply — and the second application must report what the first did
// (the seeds' property: applying an operation twice leaves the same state as
// applying it once). The sequences come from a random seed that a failure
// prints; set STORETEST_SEED to that number to replay them.

var modelCases = []testCase{
	{"RandomSequences", runModel},
}

const (
	modelOps  = 40
	modelUnit = 10 * time.Second // leases and retentions are 1 or 3 units
	modelStep = 7 * time.Second  // never a multiple of the unit: no op lands on an expiry instant
)

type opKind uint8

const (
	opClaim opKind = iota
	opComplete
	opRelease
	opGet
	opRenew
	opAdvance
)

type op struct {
	kind    opKind
	key     string
	fp      string
	tok     store.Token
	resp    string
	dur     time.Duration
	retried bool
}

func (o op) String() string {
	var s string
	switch o.kind {
	case opClaim:
		s = fmt.Sprintf("Claim(%s, %s, %s, %v)", o.key, o.fp, o.tok, o.dur)
	case opComplete:
		s = fmt.Sprintf("Complete(%s, %s, %q, %v)", o.key, o.tok, o.resp, o.dur)
	case opRelease:
		s = fmt.Sprintf("Release(%s, %s)", o.key, o.tok)
	case opGet:
		s = fmt.Sprintf("Get(%s)", o.key)
	case opRenew:
		s = fmt.Sprintf("Renew(%s, %s, %v)", o.key, o.tok, o.dur)
	case opAdvance:
		s = fmt.Sprintf("time +%v", o.dur)
	}
	if o.retried {
		s += " twice"
	}
	return s
}

func genOps(r *rand.Rand, withTime bool) []op {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	ops := make([]op, modelOps)
	for i := range ops {
		o := op{
			key:     pick("k1", "k2"),
			fp:      pick("fpA", "fpA", "fpB"),
			tok:     store.Token(pick("t1", "t2", "t3")),
			resp:    pick("r1", "r2", ""),
			dur:     modelUnit * time.Duration(1+2*r.IntN(2)),
			retried: r.IntN(4) == 0,
		}
		switch n := r.IntN(22); {
		case n < 7:
			o.kind = opClaim
		case n < 12:
			o.kind = opComplete
		case n < 15:
			o.kind = opRelease
		case n < 17:
			o.kind = opRenew
		case n < 19 || !withTime:
			o.kind = opGet
		default:
			o.kind, o.dur, o.retried = opAdvance, modelStep*time.Duration(1+r.IntN(2)), false
		}
		if !withTime {
			o.dur = long // nothing may expire on the real clock
		}
		ops[i] = o
	}
	return ops
}

// modelRecord is the model's view of one key. A lapsed lease is kept (as
// absent) because Complete by its holder may then go either way, and
// because the claim that takes it over counts one attempt more (a sequence
// is far shorter than store.LapsedKept); so is a completed record whose
// retention is over, after which a claim counts from 1.
type modelRecord struct {
	fp, resp  string
	tok       store.Token
	completed bool
	expires   time.Duration // since the start of the sequence
	attempt   uint32
}

type model struct {
	now  time.Duration
	recs map[string]modelRecord
}

func (m *model) live(key string) (modelRecord, bool) {
	r, ok := m.recs[key]
	return r, ok && r.expires > m.now
}

// result is what one operation reported, in a form both sides produce.
type result struct {
	outcome store.Outcome
	err     string // "", "ErrLeaseLost", "ErrNotFound", or "other: ..."
	rec     string // status/token/fingerprint/response of the returned record
}

func (r result) String() string {
	switch {
	case r.err != "":
		return "error " + r.err
	case r.outcome != 0:
		return r.outcome.String() + ", record {" + r.rec + "}"
	case r.rec != "":
		return "record {" + r.rec + "}"
	}
	return "nil"
}

func describeModel(status store.Status, tok store.Token, fp, resp string) string {
	return fmt.Sprintf("%v token=%s fp=%s resp=%q", status, tok, fp, resp)
}

func (m *model) apply(o op) (res result, either bool) {
	switch o.kind {
	case opAdvance:
		m.now += o.dur
	case opClaim:
		prev, found := m.recs[o.key]
		r, live := m.live(o.key)
		switch {
		case !live, !r.completed && r.tok == o.tok && r.fp == o.fp:
			attempt := uint32(1)
			switch {
			case live:
				attempt = prev.attempt // re-entrant
			case found && !prev.completed:
				attempt = prev.attempt + 1 // a takeover of a lapsed lease
			}
			r = modelRecord{fp: o.fp, tok: o.tok, expires: m.now + o.dur, attempt: attempt}
			m.recs[o.key] = r
			res.outcome = store.Acquired
			res.rec = describeRec(r) + " attempt=" + strconv.Itoa(int(attempt))
			return res, false
		case r.fp != o.fp:
			res.outcome = store.Mismatch
		case r.completed:
			res.outcome = store.Completed
		default:
			res.outcome = store.InProgress
		}
		res.rec = describeRec(r)
	case opComplete:
		r, ok := m.recs[o.key]
		live := ok && r.expires > m.now
		switch {
		case live && r.tok == o.tok && r.completed:
			// A retried Complete: nil, and the first response stays.
		case live && r.tok == o.tok:
			m.complete(o)
		case ok && !live && !r.completed && r.tok == o.tok:
			return result{}, true // lapsed lease, nobody else claimed: nil or ErrLeaseLost
		default:
			res.err = "ErrLeaseLost"
		}
	case opRelease:
		if r, live := m.live(o.key); live && !r.completed && r.tok == o.tok {
			delete(m.recs, o.key)
		}
	case opGet:
		r, live := m.live(o.key)
		if !live {
			res.err = "ErrNotFound"
		} else {
			res.rec = describeRec(r) + " attempt=" + strconv.Itoa(int(r.attempt))
		}
	case opRenew:
		r, live := m.live(o.key)
		if !live || r.completed || r.tok != o.tok {
			res.err = "ErrLeaseLost" // never creates or revives a record
			break
		}
		r.expires = m.now + o.dur
		m.recs[o.key] = r
	}
	return res, false
}

// complete marks o.key completed by o.tok with o.resp, keeping its fingerprint.
func (m *model) complete(o op) {
	r := m.recs[o.key]
	m.recs[o.key] = modelRecord{fp: r.fp, tok: o.tok, resp: o.resp, completed: true, expires: m.now + o.dur, attempt: r.attempt}
}

func describeRec(r modelRecord) string {
	st := store.StatusInProgress
	if r.completed {
		st = store.StatusCompleted
	}
	return describeModel(st, r.tok, r.fp, r.resp)
}

func (e *env) applyStore(s store.Store, o op) result {
	var res result
	var err error
	switch o.kind {
	case opAdvance:
		e.clock.Advance(o.dur)
		return res
	case opClaim:
		var c store.Claim
		c, err = s.Claim(e.ctx, o.key, o.fp, o.tok, o.dur)
		res.outcome = c.Outcome
		res.rec = describeModel(c.Record.Status, c.Record.Token, c.Record.Fingerprint, string(c.Record.Response))
		if c.Outcome == store.Acquired {
			res.rec += " attempt=" + strconv.Itoa(int(c.Record.Attempt))
		}
	case opComplete:
		err = s.Complete(e.ctx, o.key, o.tok, []byte(o.resp), o.dur)
	case opRelease:
		err = s.Release(e.ctx, o.key, o.tok)
	case opGet:
		var r store.Record
		r, err = s.Get(e.ctx, o.key)
		if err == nil {
			res.rec = describeModel(r.Status, r.Token, r.Fingerprint, string(r.Response)) + " attempt=" + strconv.Itoa(int(r.Attempt))
		}
	case opRenew:
		err = s.Renew(e.ctx, o.key, o.tok, o.dur)
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLeaseLost):
		res.err = "ErrLeaseLost"
	case errors.Is(err, store.ErrNotFound):
		res.err = "ErrNotFound"
	default:
		res.err = "other: " + err.Error()
	}
	if res.err != "" {
		res.rec = ""
	}
	return res
}

// runSequence applies ops to a fresh store and the model and returns a
// description of the first divergence, or "" if there is none.
func (e *env) runSequence(s store.Store, ops []op) string {
	m := &model{recs: map[string]modelRecord{}}
	var log strings.Builder
	for i, o := range ops {
		fmt.Fprintf(&log, "  %2d. %v\n", i+1, o)
		want, either := m.apply(o)
		got := e.applyStore(s, o)
		if either {
			// The store chose; keep the model in step with its choice.
			switch got.err {
			case "":
				m.complete(o)
			case "ErrLeaseLost":
				// The lapsed lease stays, as absent: a takeover counts it.
			}
			want = got
		}
		if got != want {
			return fmt.Sprintf("%s  step %d: store reported %v; the contract says %v", log.String(), i+1, got, want)
		}
		if o.retried {
			again := e.applyStore(s, o)
			if again != got {
				return fmt.Sprintf("%s  step %d retried: store reported %v; the first application reported %v", log.String(), i+1, again, got)
			}
		}
	}
	return ""
}

func runModel(e *env) {
	withTime := e.clock != nil
	runs := 30
	if !withTime {
		runs = 10
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("STORETEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	for run := 0; run < runs; run++ {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		ops := genOps(r, withTime)
		if d := e.runSequence(e.s, ops); d != "" {
			ops, d = e.shrink(ops, d)
			e.Fatalf("the store diverged from the contract after %d operations (shrunk; STORETEST_SEED=%d reproduces it, run %d):\n%s", len(ops), seed, run, d)
		}
		e.s = e.fresh()
	}
}

// shrink drops operations one at a time while the sequence still diverges
// on a fresh store, and returns the shortest sequence found.
func (e *env) shrink(ops []op, d string) ([]op, string) {
	for budget, i := 100, 0; i < len(ops) && budget > 0; budget-- {
		shorter := append(append([]op(nil), ops[:i]...), ops[i+1:]...)
		if d2 := e.runSequence(e.fresh(), shorter); d2 != "" {
			ops, d = shorter, d2
			continue
		}
		i++
	}
	return ops, d
}

// fresh returns a new store from the harness, moving e's clock to it.
func (e *env) fresh() store.Store {
	sub := e.h.New(e.T)
	e.clock, e.sub = sub.Clock, sub
	return sub.Store
}
