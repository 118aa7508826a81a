package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// errRollback makes InTx roll back on purpose (a discarded verdict, a
// response not kept).
var errRollback = errors.New("idem: rolled back")

// txRun is what happened inside one InTx call.
type txRun struct {
	claim    store.Claim
	outcome  store.Outcome
	claimErr error
	ran      bool
	verdict  Verdict
	returned bool
}

// runTx is transactional mode: claim, work and Complete in one InTx. A
// concurrent duplicate blocks on the key's row until the first transaction
// ends. The slow-claim rule does not apply here: a claim may wait for that
// row, and the transaction keeps everyone else out of the key; the lease is
// renewed once before Complete when the work ran past half of it.
//
// The transaction runs on a context detached from the caller's: a caller
// that goes away while the claim waits ends the transaction, one that goes
// away while the work runs cancels the work's context (as in lease mode),
// and one that goes away after the work returned changes nothing: Complete
// and the commit go on, bounded by the lease.
func (e *Engine) runTx(ctx context.Context, r *run, work Work) (Result, error) {
	key := r.key
	tok := store.NewToken()
	var deadline time.Time
	if e.opts.wait > 0 {
		deadline = time.Now().Add(e.opts.wait)
	}
	wait := newBackoff(backoffFirst, waitMaxBackoff)
	for {
		var run txRun
		r.lease = e.leaseFor(ctx) // a wait shortens what is left of the caller's deadline
		d := e.detach(ctx)
		err := e.call(ctx, key, OpTx, func() error {
			return e.tx.InTx(d.ctx, func(tctx context.Context, s store.Store) error {
				return e.inTx(tctx, d, s, r, tok, work, &run)
			})
		})
		d.stop()
		if !run.ran {
			if run.claimErr != nil || err != nil {
				if err == nil {
					err = run.claimErr
				}
				if ctx.Err() != nil {
					return Result{}, fmt.Errorf("idem: claim %q: %w", e.show(key), context.Cause(ctx))
				}
				return Result{}, fmt.Errorf("idem: claim %q: %w: %w", e.show(key), ErrUnavailable, err)
			}
			switch {
			case run.outcome == store.InProgress && e.opts.wait > 0 && e.waitStep(ctx, key, deadline, &wait):
				continue
			case run.outcome == store.InProgress && ctx.Err() != nil:
				return Result{Outcome: run.outcome, Record: run.claim.Record}, fmt.Errorf("idem: wait for %q: %w", e.show(key), context.Cause(ctx))
			}
			return e.duplicate(ctx, key, run.claim, run.outcome), nil
		}
		return e.afterTx(ctx, key, &run, err)
	}
}

// detached is the context a transaction runs on: the caller's values,
// not its cancellation, except while the claim waits (then the caller's
// end ends the transaction) and while the work runs (then it cancels the
// work's context only). After the work returned, the transaction has the
// lease to commit.
type detached struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	phase    int // 0 claiming, 1 working, 2 settling
	work     context.CancelCauseFunc
	stopCall func() bool
	timer    *time.Timer
}

var errSettleTimeout = errors.New("idem: the transaction did not commit within the lease after the work")

func (e *Engine) detach(caller context.Context) *detached {
	d := &detached{}
	d.ctx, d.cancel = context.WithCancelCause(context.WithoutCancel(caller))
	d.stopCall = context.AfterFunc(caller, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch d.phase {
		case 0:
			d.cancel(context.Cause(caller))
		case 1:
			d.work(context.Cause(caller))
		}
	})
	return d
}

// working derives the work's context from the transaction's; it carries a,
// the Attempt of the claim.
func (d *detached) working(tctx context.Context, caller context.Context, a Attempt) (context.Context, context.CancelCauseFunc) {
	cctx, cancel := context.WithCancelCause(tctx)
	d.mu.Lock()
	d.phase, d.work = 1, cancel
	d.mu.Unlock()
	if caller.Err() != nil {
		cancel(context.Cause(caller))
	}
	// One of its own each time: InTx may run fn again, and a work's
	// context must not change under a goroutine it left behind.
	return &workCtx{Context: cctx, attempt: a}, cancel
}

// settling ends the caller's hold on the transaction: from now on it has
// bound to commit.
func (d *detached) settling(bound time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.phase == 2 {
		return
	}
	d.phase = 2
	if d.timer != nil {
		d.timer.Stop()
	}
	d.timer = time.AfterFunc(bound, func() { d.cancel(errSettleTimeout) })
}

func (d *detached) stop() {
	d.stopCall()
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	d.cancel(nil)
}

func (e *Engine) inTx(ctx context.Context, d *detached, s store.Store, r *run, tok store.Token, work Work, run *txRun) error {
	key, fp := r.key, r.fp
	*run = txRun{} // InTx may call fn again after a retryable failure
	c, err := e.claim(ctx, s, key, fp, tok, r.lease, OpClaim)
	if err != nil {
		run.claimErr = err
		return err
	}
	run.claim, run.outcome = c, r.interpret(c)
	if run.outcome != store.Acquired {
		return nil // nothing written: the commit is a no-op
	}
	a := attemptOf(c)
	e.emit(ctx, Event{Kind: Acquired, Key: key, Attempt: a})
	run.ran = true
	claimed := time.Now()
	defer func() {
		if !run.returned {
			e.emit(ctx, Event{Kind: Released, Key: key, Reason: "panic; transaction rolled back"})
		}
	}()
	wctx, cancel := d.working(ctx, r.caller, a)
	traced := e.Traced() // the times are for the tracer's RunEnd only
	if traced {
		r.workStart = time.Now()
	}
	run.verdict = work(wctx)
	if traced {
		r.workEnd = time.Now()
	}
	cancel(nil)
	d.settling(r.lease)
	r.verdict = run.verdict
	run.returned = true
	if k := run.verdict.kindOrKeep(); k != keep {
		return errRollback
	}
	if time.Since(claimed) >= r.lease/2 {
		// The lease still applies in a transaction. Nobody can take the key
		// over while this transaction holds its row, so it is not renewed
		// while the work runs (a driver's transaction is not safe for
		// concurrent use); it is renewed once here, with the transaction's
		// Store.Renew, so a slow work's Complete does not fail. A lease
		// that already lapsed by the store's clock cannot be renewed: the
		// Complete below then finds it so and claims the key back.
		err := e.call(ctx, key, OpRenew, func() error { return s.Renew(ctx, key, tok, r.lease) })
		switch {
		case err == nil:
			e.emit(ctx, Event{Kind: Renewed, Key: key})
		case !errors.Is(err, store.ErrLeaseLost):
			return err
		}
	}
	complete := func() error {
		return e.call(ctx, key, OpComplete, func() error {
			return s.Complete(ctx, key, tok, run.verdict.response, e.opts.retention)
		})
	}
	err = complete()
	if errors.Is(err, store.ErrLeaseLost) {
		// The work outlived the lease by the store's clock. No other claim
		// can have taken the key meanwhile (it waits on the key's row until
		// this transaction ends), so claiming it again with the same token
		// renews the lease, and the completion goes through.
		if c, cerr := e.claim(ctx, s, key, fp, tok, r.lease, OpRenew); cerr == nil && c.Outcome == store.Acquired {
			e.emit(ctx, Event{Kind: Renewed, Key: key})
			err = complete()
		}
	}
	return err
}

// afterTx reports a transaction whose work ran; err is what InTx returned.
func (e *Engine) afterTx(ctx context.Context, key string, run *txRun, err error) (Result, error) {
	res := Result{Outcome: store.Acquired}
	v := run.verdict
	switch {
	case err == nil:
		res.Settle = SettleCompleted
		e.emit(ctx, Event{Kind: Completed, Key: key, Status: v.status})
		return res, nil
	case errors.Is(err, errRollback):
		res.Settle = SettleReleased
		reason := v.reason
		if reason == "" {
			reason = "rolled back"
		}
		e.emit(ctx, Event{Kind: Released, Key: key, Status: v.status, Reason: reason + "; transaction rolled back"})
		return res, nil
	case errors.Is(err, store.ErrLeaseLost):
		res.Settle = SettleLeaseLost
		e.emit(ctx, Event{Kind: LeaseLost, Key: key, Status: v.status, Err: err, Reason: "transaction rolled back"})
		return res, fmt.Errorf("idem: complete %q: %w", e.show(key), err)
	default:
		// Complete or the commit failed. The transaction did not commit, or
		// (when the reply to COMMIT was lost) nobody knows whether it did;
		// either way a retry with the same key replays or runs, whichever is
		// true.
		res.Settle = SettleUnknown
		e.emit(ctx, Event{Kind: Unknown, Key: key, Status: v.status, Err: err})
		e.Logger().ErrorContext(ctx, "idem: transaction failed after the work ran; not committed, or its outcome is unknown", "key", e.show(key), "err", err)
		return res, fmt.Errorf("idem: commit %q: %w: %w", e.show(key), ErrNotRecorded, err)
	}
}
