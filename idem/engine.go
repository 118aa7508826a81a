package idem

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/internal/invalid"
	"log/slog"
	"sync"
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

// ErrPanicked is RunEnd.Err when the work panicked (the key was released
// and the panic went on). Run itself never returns it.
var ErrPanicked = errors.New("idem: the work panicked")

// Engine runs work once per key: claim → run → settle. It is the one
// configured object of idemkit: lease, wait, retention, logger, key
// redactor and tracer are set once, on New, and every surface (httpidem,
// dedup, grpcidem, Do) takes the Engine. It is safe for concurrent use by
// multiple goroutines. See the package documentation for its contract.
type Engine struct {
	s      store.Store
	tx     store.Transactor // nil when the store has no transactions
	opts   options
	tracer MultiTracer
	events bool // a tracer is an EventTracer
	wheel  wheel
}

// New returns an Engine that records keys in s. It fails with an error
// matching store.ErrInvalid when s is nil, an option is nil or has an
// invalid value.
func New(s store.Store, opts ...Option) (*Engine, error) {
	if err := checkStore(s); err != nil {
		return nil, fmt.Errorf("idem: new: %w", err)
	}
	e := &Engine{s: s, opts: defaults()}
	if err := invalid.Apply(&e.opts, opts); err != nil {
		return nil, fmt.Errorf("idem: new: %w", err)
	}
	e.tx, _ = s.(store.Transactor)
	e.tracer = MultiTracer(e.opts.tracers)
	for _, t := range e.tracer {
		if _, ok := t.(EventTracer); ok {
			e.events = true
		}
	}
	return e, nil
}

// Lease returns the engine's lease (WithLease). A run whose caller has a
// deadline may hold a shorter one (WithLeaseFromDeadline).
func (e *Engine) Lease() time.Duration { return e.opts.lease }

// Retention returns the engine's retention.
func (e *Engine) Retention() time.Duration { return e.opts.retention }

// Wait returns how long a call waits for a key in progress (WithWait).
func (e *Engine) Wait() time.Duration { return e.opts.wait }

// CanTransact reports whether the engine's store is a store.Transactor, so
// that InTx runs can use it.
func (e *Engine) CanTransact() bool { return e.tx != nil }

// Traced reports whether the engine has a tracer (WithTracer). A surface
// may skip what only a tracer reads when it has none, as httpidem does with
// the request it puts in the run's context (RequestFrom).
func (e *Engine) Traced() bool { return len(e.tracer) > 0 }

// Logger returns the engine's logger (WithLogger), for surfaces that log
// beside the engine.
func (e *Engine) Logger() *slog.Logger {
	if e.opts.logger != nil {
		return e.opts.logger
	}
	return slog.Default()
}

// RedactKey returns key as log lines and error texts may carry it (see
// WithKeyRedactor).
func (e *Engine) RedactKey(key string) string { return e.show(key) }

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

// RunOption configures one Run call. A nil RunOption or an invalid value
// makes Run fail with store.ErrInvalid before anything runs.
type RunOption func(*runOptions) error

type runOptions struct {
	tx, txIfSupported bool
	same              func(recorded, presented string) bool
}

// InTx runs claim, work and Complete in one transaction of the store, which
// must implement store.Transactor (Run fails with store.ErrInvalid
// otherwise; see CanTransact). The work's context carries the transaction
// (sqlite.TxFrom, postgres.TxFrom, or the backend's Querier), and
// everything it writes through it commits with the key and the stored
// response, or rolls back with them. Choose it only when the work's effect
// is a write to that same database: the transaction is held open for the
// whole work (on SQLite, the database's one write lock). A caller that goes
// away after the work returned does not roll it back: the commit runs on a
// context detached from the caller's, bounded by the lease.
func InTx() RunOption {
	return func(o *runOptions) error {
		o.tx = true
		return nil
	}
}

// InTxIfSupported is InTx when the engine's store is a store.Transactor
// and lease mode otherwise: one handler, written with the backend's Querier
// (postgres.Querier, sqlite.Querier, mysql.Querier), then runs
// transactionally on a SQL store and in lease mode on memory:// or Redis.
func InTxIfSupported() RunOption {
	return func(o *runOptions) error {
		o.txIfSupported = true
		return nil
	}
}

// WithSameRequest sets a function that decides whether a claim reported as
// store.Mismatch is nevertheless the same request: same(recorded, presented)
// gets the record's fingerprint and the call's. It is for fingerprints that
// cannot be compared (two versions of a fingerprint algorithm); such a claim
// is then taken as what the record's state says (Completed or InProgress).
// Default: a mismatch is a mismatch.
func WithSameRequest(same func(recorded, presented string) bool) RunOption {
	return func(o *runOptions) error {
		if same == nil {
			return errors.New("WithSameRequest(nil): pass a function")
		}
		o.same = same
		return nil
	}
}

// Run runs work once for key. The claim's fingerprint identifies the
// request the key was first used with (empty: not checked). The returned
// error is nil when the work ran and was settled as it asked, and when the
// key was a duplicate (see Result.Outcome); otherwise it matches
// ErrUnavailable (the work did not run), store.ErrLeaseLost or
// ErrNotRecorded (the work ran; its result is not recorded), the store's
// error from a failed release (Settle is SettleFailed; the key lapses with
// its lease), the caller's context error (the caller left while waiting),
// or store.ErrInvalid (an invalid argument or option; nothing ran).
func (e *Engine) Run(ctx context.Context, key, fingerprint string, work Work, opts ...RunOption) (Result, error) {
	if work == nil {
		return Result{}, fmt.Errorf("idem: run: nil work: %w", store.ErrInvalid)
	}
	if ctx == nil {
		return Result{}, fmt.Errorf("idem: run: nil context: %w", store.ErrInvalid)
	}
	if err := store.CheckClaim(key, fingerprint, "t", e.opts.lease); err != nil {
		return Result{}, fmt.Errorf("idem: run: %w", err)
	}
	r := &run{key: key, fp: fingerprint, caller: ctx} // r.lease: set at each claim (runLease, runTx)
	if err := applyRunOptions(&r.opts, opts); err != nil {
		return Result{}, fmt.Errorf("idem: run: %w", err)
	}
	if r.opts.txIfSupported && e.tx != nil {
		r.opts.tx = true
	}
	if r.opts.tx && e.tx == nil {
		return Result{}, fmt.Errorf("idem: run: InTx needs a store.Transactor, and %T is not one (use InTxIfSupported for lease mode on such stores): %w", e.s, store.ErrInvalid)
	}
	if !e.Traced() {
		return e.run(ctx, r, work)
	}
	ctx = e.tracer.TraceRunStart(ctx, RunStart{Key: key, Fingerprint: fingerprint, Transactional: r.opts.tx})
	var (
		res      Result
		err      error
		finished bool
	)
	defer func() {
		end := RunEnd{Key: key, Result: res, Err: err, Status: r.verdict.status, Reason: r.verdict.reason}
		if !finished {
			end.Result, end.Err, end.Reason = Result{Outcome: store.Acquired, Settle: SettleReleased}, ErrPanicked, "panic"
		}
		if !r.workStart.IsZero() && !r.workEnd.IsZero() {
			end.Work = r.workEnd.Sub(r.workStart)
			end.Settle = time.Since(r.workEnd)
		}
		e.tracer.TraceRunEnd(ctx, end)
	}()
	res, err = e.run(ctx, r, work)
	finished = true
	return res, err
}

// runOptionsPool holds the runOptions a Run's options are applied to. An
// option is a function given a pointer, so what it is given escapes to the
// heap; applied to a pooled value and copied out, they leave the Run's
// state on the stack.
var runOptionsPool = sync.Pool{New: func() any { return new(runOptions) }}

func applyRunOptions(dst *runOptions, opts []RunOption) error {
	if len(opts) == 0 {
		return nil
	}
	o := runOptionsPool.Get().(*runOptions)
	*o = runOptions{}
	err := invalid.Apply(o, opts)
	*dst = *o
	*o = runOptions{} // no function kept alive by the pool
	runOptionsPool.Put(o)
	return err
}

// run is one Run's state, read by the tracer's end.
type run struct {
	caller    context.Context
	key, fp   string
	lease     time.Duration // the run's lease: WithLease's, or less (WithLeaseFromDeadline)
	opts      runOptions
	verdict   Verdict
	workStart time.Time
	workEnd   time.Time
}

func (e *Engine) run(ctx context.Context, r *run, work Work) (Result, error) {
	if r.opts.tx {
		// The transaction's function holds the run: it escapes to the
		// heap. A copy does, so that in lease mode r stays on Run's stack.
		h := new(run)
		*h = *r
		res, err := e.runTx(ctx, h, work)
		*r = *h
		return res, err
	}
	return e.runLease(ctx, r, work)
}

// interpret maps a claim to the outcome acted on (WithSameRequest).
func (r *run) interpret(c store.Claim) store.Outcome {
	if c.Outcome == store.Mismatch && r.opts.same != nil && r.opts.same(c.Record.Fingerprint, r.fp) {
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
func (e *Engine) waitStep(ctx context.Context, key string, deadline time.Time, b *backoff) bool {
	left := time.Until(deadline)
	if left <= 0 || ctx.Err() != nil {
		return false
	}
	if b.first() {
		e.emit(ctx, Event{Kind: Waiting, Key: key})
	}
	t := time.NewTimer(min(b.next(), left))
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
	if !e.events {
		return e.scrub(key, f())
	}
	start := time.Now()
	err := e.scrub(key, f())
	e.emit(ctx, Event{Kind: StoreCall, Key: key, Op: op, Took: time.Since(start), Err: err})
	// A renewal refused because the lease is over is no failure of the
	// store: the heartbeat reports it as LeaseLost (or as nothing, when
	// the key is settled).
	if err != nil && (op != OpRenew || !errors.Is(err, store.ErrLeaseLost)) {
		e.emit(ctx, Event{Kind: StoreError, Key: key, Op: op, Err: err})
	}
	return err
}

func (e *Engine) claim(ctx context.Context, s store.Store, key, fp string, tok store.Token, lease time.Duration, op string) (store.Claim, error) {
	if !e.events {
		// call's work without its closure: the claim is returned once,
		// not copied through a captured variable.
		c, err := s.Claim(ctx, key, fp, tok, lease)
		return c, e.scrub(key, err)
	}
	var c store.Claim
	err := e.call(ctx, key, op, func() (err error) {
		c, err = s.Claim(ctx, key, fp, tok, lease)
		return err
	})
	return c, err
}
