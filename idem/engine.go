package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Errors returned by Run. Compare with errors.Is.
var (
	// ErrUnavailable: the store failed before the work ran (a failed or
	// too slow claim); the work did not run. Retry later with the same key.
	ErrUnavailable = errors.New("idem: store unavailable")
	// ErrSlowClaim: the claim's reply came after half the lease, so the
	// lease may lapse before it can be renewed; the key was released and the
	// work did not run. It also matches ErrUnavailable.
	ErrSlowClaim = fmt.Errorf("%w: claim too slow", ErrUnavailable)
	// ErrNotRecorded: the work ran but its result could not be recorded:
	// the store kept failing until the lease ended, or (transactional mode)
	// the commit's outcome is unknown. The key is left to its lease (or to
	// the transaction's fate); a retry after it replays or runs.
	ErrNotRecorded = errors.New("idem: result not recorded")
	// ErrNotKept: a replay of a key completed without its response (too
	// large to keep): the work was done, its answer is gone. Returned by Do.
	ErrNotKept = errors.New("idem: done, response not kept")
)

// Engine runs work once per key: claim → run → settle. It is safe for
// concurrent use by multiple goroutines. See the package documentation for
// its contract.
type Engine struct {
	s    store.Store
	tx   store.Transactor // set in transactional mode
	opts options
}

// New returns an Engine that records keys in s. It fails with an error
// matching store.ErrInvalid when s is nil, an option has an invalid value,
// or WithTransactions is given and s does not implement store.Transactor.
func New(s store.Store, opts ...Option) (*Engine, error) {
	if err := checkStore(s); err != nil {
		return nil, fmt.Errorf("idem: new: %w", err)
	}
	e := &Engine{s: s, opts: defaults()}
	for _, o := range opts {
		if o == nil {
			continue // a nil Option is skipped, as everywhere in the module
		}
		if err := o(&e.opts); err != nil {
			return nil, fmt.Errorf("idem: new: %w: %w", store.ErrInvalid, err)
		}
	}
	if e.opts.tx {
		tx, ok := s.(store.Transactor)
		if !ok {
			return nil, fmt.Errorf("idem: new: %w: WithTransactions needs a store.Transactor, and %T is not one", store.ErrInvalid, s)
		}
		e.tx = tx
	}
	return e, nil
}

// Lease returns the engine's lease.
func (e *Engine) Lease() time.Duration { return e.opts.lease }

// Retention returns the engine's retention.
func (e *Engine) Retention() time.Duration { return e.opts.retention }

// Transactional reports whether the engine runs in transactional mode.
func (e *Engine) Transactional() bool { return e.tx != nil }

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.s }

// Work is the operation run once per key. Its context is cancelled when the
// caller's is, and with store.ErrLeaseLost as cause (context.Cause) when the
// lease is lost; in transactional mode it carries the transaction. It returns
// a Verdict saying whether its effect happened. A panic counts as "did not
// happen": the key is released and the panic goes on.
type Work func(ctx context.Context) Verdict

// Settle says how the key was settled after the work ran.
type Settle uint8

const (
	// SettleCompleted: the result was recorded with its response.
	SettleCompleted Settle = iota + 1
	// SettleNotKept: the result was recorded without its response.
	SettleNotKept
	// SettleReleased: the key was released (transactional mode: rolled
	// back); a retry runs the work again.
	SettleReleased
	// SettleLeaseLost: the lease was lost to another claim (or ran out); the
	// result was not recorded and the record is the other claim's.
	SettleLeaseLost
	// SettleFailed: the result could not be recorded (ErrNotRecorded), or
	// the release failed (the key then lapses with its lease).
	SettleFailed
	// SettleUnknown: transactional mode, the commit's outcome is unknown.
	SettleUnknown
)

// String returns the settle's name in lower case.
func (s Settle) String() string {
	switch s {
	case SettleCompleted:
		return "completed"
	case SettleNotKept:
		return "completed, response not kept"
	case SettleReleased:
		return "released"
	case SettleLeaseLost:
		return "lease lost"
	case SettleFailed:
		return "failed"
	case SettleUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Settle(%d)", uint8(s))
}

// Result is what Run did.
type Result struct {
	// Outcome is store.Acquired when this call ran the work; otherwise what
	// the claim found: store.Completed (replay Record.Response),
	// store.InProgress (Record.LockedUntil says when its lease lapses), or
	// store.Mismatch. Zero when the claim failed.
	Outcome store.Outcome
	// Record is the record the claim found (not set for Acquired).
	Record store.Record
	// NotKept is set on a replay of a key completed without its response.
	NotKept bool
	// Settle says how the key was settled (Outcome == store.Acquired only).
	Settle Settle
}

// Replay reports whether the result is a replay of a completed key.
func (r Result) Replay() bool { return r.Outcome == store.Completed }

// Run runs work once for key. The claim's fingerprint identifies the
// request the key was first used with (empty: not checked). The returned
// error is nil when the work ran and was settled as it asked, and when the
// key was a duplicate (see Result.Outcome); otherwise it matches
// ErrUnavailable (the work did not run), store.ErrLeaseLost or
// ErrNotRecorded (the work ran; its result is not recorded), the store's
// error from a failed release (Settle is SettleFailed; the key lapses with
// its lease), or the caller's context error (the caller left while
// waiting).
func (e *Engine) Run(ctx context.Context, key, fingerprint string, work Work) (Result, error) {
	if work == nil {
		return Result{}, fmt.Errorf("idem: run: %w: nil work", store.ErrInvalid)
	}
	if ctx == nil {
		return Result{}, fmt.Errorf("idem: run: %w: nil context", store.ErrInvalid)
	}
	if err := store.CheckClaim(key, fingerprint, "t", e.opts.lease); err != nil {
		return Result{}, fmt.Errorf("idem: run: %w", err)
	}
	if e.tx != nil {
		return e.runTx(ctx, key, fingerprint, work)
	}
	return e.runLease(ctx, key, fingerprint, work)
}

// interpret maps a claim to the outcome acted on (WithSameRequest).
func (e *Engine) interpret(c store.Claim, fp string) store.Outcome {
	if c.Outcome == store.Mismatch && e.opts.same != nil && e.opts.same(c.Record.Fingerprint, fp) {
		switch c.Record.Status {
		case store.StatusCompleted:
			return store.Completed
		case store.StatusInProgress:
			return store.InProgress
		}
	}
	return c.Outcome
}

// duplicate builds the Result of a claim that did not acquire the key.
func (e *Engine) duplicate(ctx context.Context, key string, c store.Claim, o store.Outcome) Result {
	r := Result{Outcome: o, Record: c.Record}
	switch o {
	case store.Completed:
		r.NotKept = isNotKept(c.Record.Response)
		if r.NotKept {
			r.Record.Response = nil
		}
		e.emit(ctx, Event{Kind: Replayed, Key: key, NotKept: r.NotKept})
	case store.InProgress:
		e.emit(ctx, Event{Kind: InProgress, Key: key})
	case store.Mismatch:
		e.emit(ctx, Event{Kind: Mismatch, Key: key})
	}
	return r
}

// waitStep sleeps before the next poll of an in-progress key. It reports
// false when the wait is over (deadline passed, or ctx ended).
func (e *Engine) waitStep(ctx context.Context, key string, deadline time.Time, attempt int) bool {
	left := time.Until(deadline)
	if left <= 0 || ctx.Err() != nil {
		return false
	}
	if attempt == 0 {
		e.emit(ctx, Event{Kind: Waiting, Key: key})
	}
	d := min(5*time.Millisecond<<min(attempt, 5), 100*time.Millisecond, left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// call times one store call and reports it. The error's text names the key
// only in its redacted form (a backend may quote the key).
func (e *Engine) call(ctx context.Context, key, op string, f func() error) error {
	if len(e.opts.observers) == 0 {
		return e.scrub(key, f())
	}
	start := time.Now()
	err := e.scrub(key, f())
	e.emit(ctx, Event{Kind: StoreCall, Key: key, Op: op, Took: time.Since(start), Err: err})
	if err != nil {
		e.emit(ctx, Event{Kind: StoreError, Key: key, Op: op, Err: err})
	}
	return err
}

func (e *Engine) claim(ctx context.Context, s store.Store, key, fp string, tok store.Token, op string) (store.Claim, error) {
	var c store.Claim
	err := e.call(ctx, key, op, func() (err error) {
		c, err = s.Claim(ctx, key, fp, tok, e.opts.lease)
		return err
	})
	return c, err
}
