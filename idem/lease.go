package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// runLease is lease mode: claim (waiting if asked), run the work under a
// heartbeat, settle.
func (e *Engine) runLease(ctx context.Context, r *run, work Work) (Result, error) {
	key, fp := r.key, r.fp
	tok := store.NewToken()
	var deadline time.Time
	if e.opts.wait > 0 {
		deadline = time.Now().Add(e.opts.wait)
	}
	wait := newBackoff(backoffFirst, waitMaxBackoff)
	for {
		sent := monoNow()
		r.lease = e.leaseFor(ctx) // a wait shortens what is left of the caller's deadline
		c, err := e.claim(ctx, e.s, key, fp, tok, r.lease, OpClaim)
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("idem: claim %q: %w", e.show(key), context.Cause(ctx))
			}
			return Result{}, fmt.Errorf("idem: claim %q: %w: %w", e.show(key), ErrUnavailable, err)
		}
		o := r.interpret(c)
		switch {
		case o == store.Acquired:
			if took := time.Since(sent); took >= r.lease/2 {
				// The lease started somewhere during the claim: it may
				// already have lapsed, or lapse before a renewal or the
				// Complete reach the store, and then a retry runs the work a
				// second time. Do not run the work on such a lease.
				if e.release(ctx, key, tok, r.lease) == nil {
					e.emit(ctx, Event{Kind: Released, Key: key, Reason: "claim too slow"})
				}
				e.emit(ctx, Event{Kind: SlowClaim, Key: key})
				return Result{}, fmt.Errorf("idem: claim %q took %v, half the lease (%v) or more: %w",
					e.show(key), took.Round(time.Millisecond), r.lease, ErrSlowClaim)
			}
			a := attemptOf(c)
			e.emit(ctx, Event{Kind: Acquired, Key: key, Attempt: a})
			return e.runHeld(ctx, r, tok, sent, a, work)
		case o == store.InProgress && e.opts.wait > 0 && e.waitStep(ctx, key, deadline, &wait):
			continue
		case o == store.InProgress && ctx.Err() != nil:
			return Result{Outcome: o, Record: c.Record}, fmt.Errorf("idem: wait for %q: %w", e.show(key), context.Cause(ctx))
		}
		return e.duplicate(ctx, key, c, o), nil
	}
}

// monoEpoch anchors monoNow.
var monoEpoch = time.Now()

// monoNow returns the time now as read from the monotonic clock alone
// (about 30 ns here, where time.Now, which reads the wall clock too, takes
// 53): it is monoEpoch advanced by the monotonic time since. Its wall
// reading drifts from the wall clock's when that is stepped, so it is for
// the engine's own lease arithmetic only, which compares times by their
// monotonic readings (Since, Until, After), never for a deadline handed to
// anyone else. Every claim reads it, a replay's included.
func monoNow() time.Time { return monoEpoch.Add(time.Since(monoEpoch)) }

// runHeld runs the work on a key held by tok since a claim sent at claimed
// acquired it as attempt a, then settles.
func (e *Engine) runHeld(ctx context.Context, r *run, tok store.Token, claimed time.Time, a Attempt, work Work) (Result, error) {
	key, fp := r.key, r.fp
	// Allocated here, not in r: a replay never needs one. The work's
	// context lives in it too, so that carrying the Attempt costs no
	// allocation of its own.
	hb := &heartbeat{e: e, ctx: ctx, key: key, fp: fp, tok: tok, lease: r.lease}
	hb.work.parent, hb.work.attempt = ctx, a
	wctx := &hb.work
	defer wctx.end()
	hb.start(claimed)

	// No recover: if the work panics (or calls runtime.Goexit), this stops
	// the heartbeat and releases the key while the panic goes on with its
	// original stack.
	returned := false
	defer func() {
		if !returned {
			hb.stop()
			e.release(ctx, key, tok, hb.lease)
			e.emit(ctx, Event{Kind: Released, Key: key, Reason: "panic"})
		}
	}()
	traced := e.Traced() // the times are for the tracer's RunEnd only
	if traced {
		r.workStart = time.Now()
	}
	v := work(wctx)
	if traced {
		r.workEnd = time.Now()
	}
	r.verdict = v
	returned = true
	return e.settle(ctx, key, tok, hb, v)
}

// settle records the verdict of the work. The heartbeat runs until the key
// is settled.
func (e *Engine) settle(ctx context.Context, key string, tok store.Token, hb *heartbeat, v Verdict) (Result, error) {
	res := Result{Outcome: store.Acquired}
	if lost := hb.lostToOther(); lost != nil {
		hb.stop()
		res.Settle = SettleLeaseLost
		e.emit(ctx, Event{Kind: LeaseLost, Key: key, Err: lost, Status: v.status, Reason: "lost while the work ran"})
		return res, fmt.Errorf("idem: settle %q: %w", e.show(key), lost)
	}
	switch v.kindOrKeep() {
	case discard:
		// Stop renewing first. A renewal that reaches the store after the
		// release finds no lease of ours and changes nothing (Store.Renew
		// never revives a key), but there is no point in sending one.
		hb.stop()
		if err := e.release(ctx, key, tok, hb.lease); err != nil {
			// The key lapses with its lease; a retry runs then.
			res.Settle = SettleFailed
			return res, fmt.Errorf("idem: release %q: %w", e.show(key), err)
		}
		res.Settle = SettleReleased
		e.emit(ctx, Event{Kind: Released, Key: key, Reason: v.reason, Status: v.status})
		return res, nil
	case keepWithoutResponse:
		res.Settle = SettleNotKept
		_, err := e.complete(ctx, key, tok, hb, notKeptMarker)
		hb.stop()
		if err != nil {
			return e.notRecorded(ctx, key, res, v, err)
		}
		e.emit(ctx, Event{Kind: Completed, Key: key, NotKept: true, Reason: v.reason, Status: v.status})
		return res, nil
	}
	res.Settle = SettleCompleted
	withoutResponse, err := e.complete(ctx, key, tok, hb, v.response)
	hb.stop()
	if err != nil {
		return e.notRecorded(ctx, key, res, v, err)
	}
	if withoutResponse {
		res.Settle = SettleNotKept
	}
	e.emit(ctx, Event{Kind: Completed, Key: key, Status: v.status, NotKept: withoutResponse})
	return res, nil
}

func (e *Engine) notRecorded(ctx context.Context, key string, res Result, v Verdict, err error) (Result, error) {
	if errors.Is(err, store.ErrLeaseLost) {
		res.Settle = SettleLeaseLost
		e.emit(ctx, Event{Kind: LeaseLost, Key: key, Err: err, Status: v.status, Reason: "lost before the result was recorded"})
		e.Logger().ErrorContext(ctx, "idem: lease lost before the result was recorded; the record is another claim's", "key", e.show(key), "err", err)
		return res, fmt.Errorf("idem: complete %q: %w", e.show(key), err)
	}
	res.Settle = SettleFailed
	e.Logger().ErrorContext(ctx, "idem: could not record the result before the lease ended; a retry after it runs the work again", "key", e.show(key), "err", err)
	return res, fmt.Errorf("idem: complete %q: %w: %w", e.show(key), ErrNotRecorded, err)
}

// settleLeases is how many leases the Complete retries may last while
// renewals succeed but Complete keeps failing (a store that renews but
// refuses the write): past that the key is recorded without its response.
const settleLeases = 4

// complete records response, retrying with backoff while the heartbeat
// holds the lease. It stops when the lease is lost to another claim
// (store.ErrLeaseLost) or has ended without a successful renewal. When the
// store refuses the response itself (ErrInvalid), or keeps failing for
// settleLeases leases while renewals succeed (a server limit it does not
// name, such as a maximum packet size), it records the key as done without
// the response and reports withoutResponse: a retry is then told the work was
// done, rather than running it again once the key lapses.
func (e *Engine) complete(ctx context.Context, key string, tok store.Token, hb *heartbeat, response []byte) (withoutResponse bool, err error) {
	withoutResponse = isNotKept(response)
	defer func() {
		if err != nil {
			withoutResponse = false
		}
	}()
	bctx := context.WithoutCancel(ctx)
	lease := hb.lease
	b := newBackoff(backoffFirst, min(settleMaxBackoff, lease/8))
	start := time.Now()
	reclaims := 0
	first := true
	for {
		if lost := hb.lostToOther(); lost != nil {
			return false, lost
		}
		var actx *attemptCtx
		if first {
			// The first attempt's context lives in the heartbeat: one
			// allocation fewer on the usual path.
			first, actx = false, &hb.attempt
			actx.init(bctx, start.Add(attemptTimeout(lease))) // on the clock read above
		} else {
			actx = newAttempt(bctx, attemptTimeout(lease))
		}
		cancel := actx.stop
		err := e.call(ctx, key, OpComplete, func() error {
			return e.s.Complete(actx, key, tok, response, e.opts.retention)
		})
		// Complete failed while renewal had ended on a lapsed lease: claim
		// the key back as below, so that renewal resumes while Complete is
		// retried. (Never after a release: settle releases or completes.)
		lapsed := err != nil && !errors.Is(err, store.ErrLeaseLost) && hb.endedOnLapse()
		if lapsed {
			if c, cerr := e.claim(actx, e.s, key, hb.fp, tok, lease, OpRenew); cerr == nil {
				switch {
				case c.Outcome == store.Acquired:
					hb.renewedAt(time.Now())
					hb.resume()
				case c.Outcome == store.Completed && c.Record.Token == tok:
					cancel()
					return withoutResponse, nil // an earlier attempt went through
				default:
					cancel()
					return false, fmt.Errorf("the key is %v for another claim: %w", c.Outcome, store.ErrLeaseLost)
				}
			}
		}
		if errors.Is(err, store.ErrLeaseLost) {
			// The lease lapsed (the key is absent) or another claim holds
			// it. Claiming again with the same token tells which, atomically:
			// Acquired means nobody took it and it is ours again.
			var c store.Claim
			c, err = e.claim(actx, e.s, key, hb.fp, tok, lease, OpRenew)
			switch {
			case err != nil:
				// Unknown: try again below.
			case c.Outcome == store.Acquired && reclaims < 3:
				// Ours again; a store that keeps refusing Complete right
				// after an Acquired is broken, hence the bound.
				reclaims++
				hb.renewedAt(time.Now())
				hb.resume()
				cancel()
				continue
			case c.Outcome == store.Acquired:
				cancel()
				return false, fmt.Errorf("the store refuses Complete right after acquiring: %w", ErrNotRecorded)
			case c.Outcome == store.Completed && c.Record.Token == tok:
				cancel()
				return withoutResponse, nil // an earlier attempt went through
			default:
				cancel()
				return false, fmt.Errorf("the key is %v for another claim: %w", c.Outcome, store.ErrLeaseLost)
			}
		}
		cancel()
		if err == nil {
			return withoutResponse, nil
		}
		if errors.Is(err, store.ErrInvalid) && !withoutResponse {
			// The store refuses this response (too large for the backend):
			// the effect happened, so record the key as done without it.
			e.Logger().WarnContext(ctx, "idem: the store refused the response; recording the key without it", "key", e.show(key), "err", err)
			response, withoutResponse = notKeptMarker, true
			continue
		}
		if errors.Is(err, store.ErrInvalid) || hb.ended() {
			return false, err
		}
		if time.Since(start) >= settleLeases*lease {
			if withoutResponse {
				return false, err
			}
			// Renewals go through but this Complete never does: the store
			// refuses the response in a way it does not name. Letting the
			// key lapse would run the work again; record it as done
			// without the response, for as long again.
			e.Logger().ErrorContext(ctx, "idem: Complete keeps failing while the lease is renewed; recording the key without its response", "key", e.show(key), "err", err)
			response, withoutResponse, start = notKeptMarker, true, time.Now()
			continue
		}
		e.Logger().WarnContext(ctx, "idem: could not record the result; retrying while the lease holds", "key", e.show(key), "err", err)
		t := time.NewTimer(b.next())
		select {
		case <-t.C:
		case <-hb.lostChan():
			t.Stop()
		}
	}
}

// attemptTimeout bounds one store call made after the work ran on a lease,
// so that a hung store (a paused server) cannot hold the settle loop past
// the lease.
func attemptTimeout(lease time.Duration) time.Duration { return max(lease/4, time.Millisecond) }

// release gives the key up, trying a few times. A failure is logged: the
// lease then lapses by itself, and until then a retry finds the key in
// progress.
func (e *Engine) release(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	bctx := context.WithoutCancel(ctx)
	var err error
	b := newBackoff(backoffFirst, settleMaxBackoff)
	for i := 0; i < 3; i++ {
		actx := newAttempt(bctx, attemptTimeout(lease))
		err = e.call(ctx, key, OpRelease, func() error { return e.s.Release(actx, key, tok) })
		actx.stop()
		if err == nil || errors.Is(err, store.ErrInvalid) || i == 2 {
			break
		}
		time.Sleep(b.next())
	}
	if err != nil {
		e.Logger().ErrorContext(ctx, "idem: could not release the key; it stays claimed until its lease lapses", "key", e.show(key), "err", err)
	}
	return err
}

// heartbeat renews the lease with Store.Renew every lease/2 (every lease/8
// after a failure) with a context that ignores the caller's cancellation:
// cancelling the caller cancels the work, never the renewal.
//
// It starts lazily: the claim queues it in the engine's wheel (one timer
// for all its keys), and only when its first renewal is due does the
// renewal loop run, on a goroutine of its own. A work settled before half
// the lease leaves the wheel and never had a goroutine, channel or timer of
// its own.
type heartbeat struct {
	e          *Engine
	ctx        context.Context // the caller's, for events and logs
	key, fp    string
	tok        store.Token
	lease      time.Duration // the run's lease
	work       leaseCtx      // the work's context, with its Attempt
	due        time.Time     // the first renewal's, while queued
	prev, next *heartbeat    // in the engine's wheel, while queued
	queued     bool          // waiting in the wheel for its first renewal
	attempt    attemptCtx    // the first Complete attempt's context

	mu      sync.Mutex
	stopped bool               // stop was called: the loop must not start, or end
	rcancel context.CancelFunc // the renewals' context, once the loop started
	wake    chan struct{}      // closed by stop, once the loop started
	done    chan struct{}      // closed when the loop ends, once it started
	lostCh  chan struct{}      // closed when the lease is lost, made on demand
	renewed time.Time          // when the claim or renewal that last extended the lease was sent
	lost    error              // another claim holds the key
	lapsed  bool               // the lease ran out without a renewal, or the store says it is over
	// overInStore: renewal ended because the store said the lease lapsed
	// (the key absent); complete may claim it back and resume renewal.
	overInStore bool
}

// loopsStarted counts renewal loops started, for the tests that prove a
// short work starts none.
var loopsStarted atomic.Int64

// start arms the heartbeat of a key claimed by a claim sent at claimed.
func (hb *heartbeat) start(claimed time.Time) {
	hb.renewed = claimed
	hb.e.wheel.add(hb, claimed.Add(hb.lease/2))
}

// stop ends renewal and waits for a renewal in flight to end.
func (hb *heartbeat) stop() {
	if hb.e == nil {
		return // never started
	}
	if hb.e.wheel.remove(hb) {
		return // not due yet: no loop was started, none will be
	}
	hb.mu.Lock()
	if hb.stopped {
		done := hb.done
		hb.mu.Unlock()
		if done != nil {
			<-done
		}
		return
	}
	hb.stopped = true
	done := hb.done
	if done != nil {
		hb.rcancel()
		close(hb.wake)
	}
	hb.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (hb *heartbeat) lostToOther() error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.lost
}

// lostChan returns a channel closed when the lease is lost to another claim.
func (hb *heartbeat) lostChan() <-chan struct{} {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.lostCh == nil {
		hb.lostCh = make(chan struct{})
		if hb.lost != nil {
			close(hb.lostCh)
		}
	}
	return hb.lostCh
}

// ended reports whether the lease is over: lost to another claim, or no
// renewal succeeded for a whole lease.
func (hb *heartbeat) ended() bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.lost != nil || time.Since(hb.renewed) >= hb.lease
}

func (hb *heartbeat) renewedAt(t time.Time) {
	hb.mu.Lock()
	if t.After(hb.renewed) {
		hb.renewed = t
	}
	hb.mu.Unlock()
}

// run is the renewal loop, started by the wheel when the first renewal is
// due, unless stop came first.
func (hb *heartbeat) run() {
	hb.mu.Lock()
	if hb.stopped {
		hb.mu.Unlock()
		return
	}
	rctx, wake, done := hb.armLocked()
	hb.mu.Unlock()
	hb.loop(rctx, wake, done, 0)
}

// armLocked makes the context and channels of a renewal loop about to
// start. The caller holds hb.mu.
func (hb *heartbeat) armLocked() (rctx context.Context, wake, done chan struct{}) {
	rctx, hb.rcancel = context.WithCancel(context.WithoutCancel(hb.ctx))
	hb.wake, hb.done = make(chan struct{}), make(chan struct{})
	return rctx, hb.wake, hb.done
}

// loop renews until stopped or the lease is over, the first renewal after
// first (at once when zero).
func (hb *heartbeat) loop(rctx context.Context, wake, done chan struct{}, first time.Duration) {
	loopsStarted.Add(1)
	defer close(done)
	var t *time.Timer
	retry := newBackoff(backoffFirst, hb.lease/8)
	next := first
	for {
		if next > 0 {
			if t == nil {
				t = time.NewTimer(next)
				defer t.Stop()
			} else {
				t.Reset(next)
			}
			select {
			case <-wake:
				return
			case <-t.C:
			}
		}
		var ok bool
		if next, ok = hb.renew(rctx, &retry); !ok {
			return
		}
	}
}

// resume restarts renewal once complete has claimed the key back, when the
// loop had ended because the store said the lease lapsed (nobody took the
// key). It does nothing otherwise.
func (hb *heartbeat) resume() {
	hb.mu.Lock()
	if !hb.overInStore || hb.stopped || hb.lost != nil {
		hb.mu.Unlock()
		return
	}
	hb.overInStore, hb.lapsed = false, false
	ended, endedCancel := hb.done, hb.rcancel
	rctx, wake, done := hb.armLocked()
	hb.mu.Unlock()
	endedCancel()
	<-ended // the ended loop is gone: it closes done last
	go hb.loop(rctx, wake, done, hb.lease/2)
}

// endedOnLapse reports whether renewal ended because the store said the
// lease lapsed, and nobody has claimed the key back since.
func (hb *heartbeat) endedOnLapse() bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.overInStore
}

// renew sends one renewal and returns when the next is due; false ends the
// loop.
func (hb *heartbeat) renew(rctx context.Context, retry *backoff) (time.Duration, bool) {
	e := hb.e
	lease := hb.lease
	actx, cancel := context.WithTimeout(rctx, max(lease/2, time.Millisecond))
	sent := time.Now()
	err := e.call(actx, hb.key, OpRenew, func() error { return e.s.Renew(actx, hb.key, hb.tok, lease) })
	var why string // set when the store says the lease is over
	if errors.Is(err, store.ErrLeaseLost) {
		// Renew never says why; one Get does. An error of its own is
		// taken as the renewal's: try again.
		r, gerr := e.s.Get(actx, hb.key)
		switch {
		case gerr == nil && r.Status == store.StatusCompleted && r.Token == hb.tok:
			cancel()
			return 0, false // settled: a Complete of ours went through
		case gerr == nil && r.Token != hb.tok:
			why = "another claim holds the key"
			hb.loseTo(fmt.Errorf("idem: renew %q: the key is %v for another claim: %w", e.show(hb.key), r.Status, store.ErrLeaseLost))
		case errors.Is(gerr, store.ErrNotFound):
			why = "the lease lapsed"
		case gerr == nil:
			// Ours and live again: a Complete that found the lease lapsed
			// claimed the key back meanwhile. The next renewal extends it.
			err = nil
		default:
			err = e.scrub(hb.key, gerr)
		}
	}
	cancel()
	if rctx.Err() != nil {
		return 0, false // stopped while renewing
	}
	switch {
	case err == nil:
		hb.renewedAt(sent)
		hb.mu.Lock()
		hb.lapsed = false
		hb.mu.Unlock()
		e.emit(hb.ctx, Event{Kind: Renewed, Key: hb.key})
		retry.reset(backoffFirst)
		return lease / 2, true
	case why != "":
		hb.mu.Lock()
		first := !hb.lapsed
		hb.lapsed = true
		lost := hb.lost
		hb.overInStore = lost == nil
		hb.mu.Unlock()
		if lost == nil {
			lost = fmt.Errorf("idem: renew %q: %s: %w", e.show(hb.key), why, store.ErrLeaseLost)
		}
		if first || !hb.endedOnLapse() { // a loss to another claim is always told
			e.emit(hb.ctx, Event{Kind: LeaseLost, Key: hb.key, Err: lost, Reason: why})
			e.Logger().ErrorContext(hb.ctx, "idem: lease lost ("+why+"); cancelling the work", "key", e.show(hb.key))
		}
		// The lease is over: renewing cannot bring it back.
		hb.work.cancel(store.ErrLeaseLost)
		return 0, false
	}
	hb.mu.Lock()
	over := time.Since(hb.renewed) >= lease
	first := over && !hb.lapsed
	if over {
		hb.lapsed = true
	}
	hb.mu.Unlock()
	if first {
		// Nobody may hold the key now, but a retry may claim it at
		// any moment: the work must stop. Renewal goes on, so that
		// the result can still be recorded if nobody took the key.
		e.emit(hb.ctx, Event{Kind: LeaseLost, Key: hb.key, Err: err, Reason: "renewals failed until the lease ran out"})
		e.Logger().ErrorContext(hb.ctx, "idem: renewals failed until the lease ran out; cancelling the work", "key", e.show(hb.key), "err", err)
		hb.work.cancel(store.ErrLeaseLost)
	} else {
		e.Logger().WarnContext(hb.ctx, "idem: lease renewal failed; retrying", "key", e.show(hb.key), "err", err)
	}
	return retry.next(), true
}

// loseTo records that another claim holds the key: settling stops, and
// waiters on lostChan wake.
func (hb *heartbeat) loseTo(err error) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.lost != nil {
		return
	}
	hb.lost = err
	if hb.lostCh != nil {
		close(hb.lostCh)
	}
}

// leaseCtx is the work's context in lease mode: the caller's context,
// cancelled when the lease is lost (with cause store.ErrLeaseLost) and when
// the run ends, answering AttemptFrom with the claim's Attempt. It lives in
// the run's heartbeat, and its cancellable context (a
// context.WithCancelCause of the caller's) is made only when first needed:
// when something asks for Done (a select on it, a context derived from it,
// a database/sql query), when the lease is lost, or when Value is asked
// after the run ended. A work that never waits on its context, ending
// before half the lease, costs neither that context nor its registration
// with the caller's.
type leaseCtx struct {
	parent  context.Context
	attempt Attempt

	mu          sync.Mutex
	inner       context.Context         // made on demand; then every answer is its
	cancelInner context.CancelCauseFunc // inner's
	ended       bool                    // the run ended before inner was made
}

// made returns the cancellable context, making it on the first call.
// The caller holds c.mu.
func (c *leaseCtx) made() context.Context {
	if c.inner == nil {
		c.inner, c.cancelInner = context.WithCancelCause(c.parent)
		if c.ended {
			c.cancelInner(nil)
		}
	}
	return c.inner
}

// Deadline implements context.Context: the caller's.
func (c *leaseCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done implements context.Context.
func (c *leaseCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made().Done()
}

// Err implements context.Context. Until the cancellable context is made it
// is the caller's, or context.Canceled once the run ended.
func (c *leaseCtx) Err() error {
	c.mu.Lock()
	inner, ended := c.inner, c.ended
	c.mu.Unlock()
	switch {
	case inner != nil:
		return inner.Err()
	case ended:
		return context.Canceled
	}
	return c.parent.Err()
}

// Value answers attemptKey with the Attempt, and every other key as the
// cancellable context does (context.Cause included), or, until it is made,
// as the caller's does: the same answers, for the cancellable context
// carries the caller's values and is cancelled exactly when the caller's
// is until the lease is lost or the run ends, and either makes it.
func (c *leaseCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c.attempt
	}
	c.mu.Lock()
	inner := c.inner
	if inner == nil && c.ended {
		inner = c.made()
	}
	c.mu.Unlock()
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}

// cancel cancels the work's context with cause: the lease is lost.
func (c *leaseCtx) cancel(cause error) {
	c.mu.Lock()
	c.made()
	cancel := c.cancelInner
	c.mu.Unlock()
	cancel(cause)
}

// end cancels the work's context when the run ends, without making it
// when nothing asked for it.
func (c *leaseCtx) end() {
	c.mu.Lock()
	c.ended = true
	cancel := c.cancelInner
	c.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
}

// workCtx is the work's context in transactional mode: the run's
// cancellable context, answering AttemptFrom with the claim's Attempt.
type workCtx struct {
	context.Context
	attempt Attempt
}

// Value answers attemptKey with the Attempt, and every other key as the
// run's context does (context.Cause and the cancellation of contexts
// derived from it included).
func (c *workCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c.attempt
	}
	return c.Context.Value(key)
}

// attemptOf returns the Attempt of a claim that acquired its key.
func attemptOf(c store.Claim) Attempt {
	return Attempt{Number: c.Record.Attempt, Fence: c.Record.Fence, Takeover: c.Takeover()}
}
