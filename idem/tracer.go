package idem

import (
	"context"
	"strconv"
	"time"
)

// Tracer sees every run of the engine, in the shape of pgx's QueryTracer:
// TraceRunStart is called before the claim and returns the context the run
// goes on in (the claim, the work, the settle, every event); TraceRunEnd is
// called with that context when Run returns, a panic of the work included.
// A span started in TraceRunStart is therefore the parent of every span the
// work starts. Both are called on the caller's goroutine; keep them fast.
// A Tracer that also implements EventTracer sees the events in between.
type Tracer interface {
	TraceRunStart(ctx context.Context, start RunStart) context.Context
	TraceRunEnd(ctx context.Context, end RunEnd)
}

// EventTracer is implemented by a Tracer that wants the events of a run
// between its start and its end: waits, renewals, lost leases, store calls
// with their durations. TraceEvent gets the context TraceRunStart returned
// (for a renewal, a context with its values); it is called on the goroutine
// that caused the event (the caller's or the heartbeat's) and must not call
// the engine.
type EventTracer interface {
	TraceEvent(ctx context.Context, ev Event)
}

// RunStart describes a run about to start.
type RunStart struct {
	// Key is the store key, raw: a tracer is the user's own code, and must
	// redact it before it reaches logs, metrics or traces (otelidem does;
	// see keyer.Redactor).
	Key string
	// Fingerprint is the request's fingerprint (empty: not checked).
	Fingerprint string
	// Transactional is set when the run is in transactional mode.
	Transactional bool
}

// RunEnd describes a run that ended.
type RunEnd struct {
	// Key is the store key, raw (see RunStart.Key).
	Key string
	// Result is what Run returned (Outcome, Settle, NotKept, Record).
	Result Result
	// Err is the error Run returned; a panic of the work has ErrPanicked.
	Err error
	// Status is the surface's status for the work's result (the HTTP
	// status; see Verdict.WithStatus) when the work ran, 0 otherwise.
	Status int
	// Reason explains a released key or a response not kept.
	Reason string
	// Work is how long the work ran (0 when it did not run); Settle how long
	// recording its result took after that.
	Work, Settle time.Duration
}

// MultiTracer calls each of its tracers in order: TraceRunStart threads the
// context through them, TraceRunEnd and TraceEvent give each the context.
type MultiTracer []Tracer

// TraceRunStart calls each tracer's TraceRunStart with the context the
// previous one returned.
func (m MultiTracer) TraceRunStart(ctx context.Context, s RunStart) context.Context {
	for _, t := range m {
		ctx = t.TraceRunStart(ctx, s)
	}
	return ctx
}

// TraceRunEnd calls each tracer's TraceRunEnd, last first, as deferred
// calls unwind.
func (m MultiTracer) TraceRunEnd(ctx context.Context, e RunEnd) {
	for i := len(m) - 1; i >= 0; i-- {
		m[i].TraceRunEnd(ctx, e)
	}
}

// TraceEvent calls TraceEvent of each tracer that is an EventTracer.
func (m MultiTracer) TraceEvent(ctx context.Context, ev Event) {
	for _, t := range m {
		if et, ok := t.(EventTracer); ok {
			et.TraceEvent(ctx, ev)
		}
	}
}

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event. Claim outcomes, settle outcomes, renewals and store
// calls: every surface (HTTP, dedup, Do, gRPC) reports through the same
// kinds, so one tracer counts them all alike.
const (
	// Acquired: the claim took the key; the work is about to run.
	Acquired EventKind = iota + 1
	// Replayed: the key was completed; its result is replayed (NotKept says
	// whether the response was kept).
	Replayed
	// InProgress: another claim holds the key; the call reports it (after
	// waiting up to WithWait).
	InProgress
	// Mismatch: the key was used with another fingerprint.
	Mismatch
	// Waiting: the key was in progress and the call starts waiting for it.
	Waiting
	// SlowClaim: the claim's reply came after half the lease; the key was
	// released and the work did not run.
	SlowClaim
	// Completed: the work's result was recorded (NotKept: without its
	// response, too large to keep).
	Completed
	// Released: the work said its effect did not happen; the key was
	// released (or, in transactional mode, the transaction rolled back).
	Released
	// LeaseLost: another claim took the key, or the lease ran out before it
	// could be renewed; the work's context is cancelled with
	// store.ErrLeaseLost and its result is not recorded.
	LeaseLost
	// StoreError: a store call failed (Err); the engine retries when the
	// rules allow. A renewal refused with store.ErrLeaseLost is not one:
	// the lease is over, and LeaseLost reports it.
	StoreError
	// Renewed: the lease was renewed while the work ran or its result was
	// being recorded.
	Renewed
	// Unknown: in transactional mode, the commit failed in a way that leaves
	// its outcome unknown; a retry replays or runs, whichever is true.
	Unknown
	// StoreCall: one store call ended; Op names it and Took is its duration.
	StoreCall
)

// String returns the kind's name in lower case.
func (k EventKind) String() string {
	switch k {
	case Acquired:
		return "acquired"
	case Replayed:
		return "replayed"
	case InProgress:
		return "in progress"
	case Mismatch:
		return "mismatch"
	case Waiting:
		return "waiting"
	case SlowClaim:
		return "slow claim"
	case Completed:
		return "completed"
	case Released:
		return "released"
	case LeaseLost:
		return "lease lost"
	case StoreError:
		return "store error"
	case Renewed:
		return "renewed"
	case Unknown:
		return "unknown"
	case StoreCall:
		return "store call"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Store call names in Event.Op.
const (
	OpClaim    = "claim"
	OpRenew    = "renew"
	OpComplete = "complete"
	OpRelease  = "release"
	OpTx       = "tx" // a whole InTx, in transactional mode
)

// Event is one thing the engine did with a key, given to EventTracer.
type Event struct {
	Kind EventKind
	// Key is the store key, raw (see RunStart.Key).
	Key string
	// Op names the store call (StoreCall, StoreError).
	Op string
	// Took is the store call's duration (StoreCall).
	Took time.Duration
	// Err is the store's error (StoreError, StoreCall) or why the lease was
	// lost (LeaseLost). Its text names the key only redacted (see
	// WithKeyRedactor); errors.Is sees the store's error.
	Err error
	// Reason explains Released, LeaseLost and Completed without response.
	Reason string
	// Status is the surface's status for the work's result when it has one
	// (the HTTP status in httpidem; see Verdict.WithStatus); 0 otherwise.
	Status int
	// NotKept is set on Completed and Replayed when the response was too
	// large to keep.
	NotKept bool
	// Attempt is the attempt that acquired the key (Acquired); zero
	// otherwise.
	Attempt Attempt
}

// emit reports ev to the tracer, if it wants events. It is small enough to
// inline, so that without an EventTracer no Event is even built.
func (e *Engine) emit(ctx context.Context, ev Event) {
	if e.events {
		e.traceEvent(ctx, ev)
	}
}

func (e *Engine) traceEvent(ctx context.Context, ev Event) { e.tracer.TraceEvent(ctx, ev) }
