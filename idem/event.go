package idem

import (
	"context"
	"strconv"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event. Claim outcomes, settle outcomes, renewals and store
// calls: every surface (HTTP, dedup, Do) reports through the same kinds, so
// one observer counts them all alike.
const (
	// Acquired: the claim took the key; the work is about to run.
	Acquired EventKind = iota + 1
	// Replayed: the key was completed; its result is replayed (NotKept says
	// whether the response was kept).
	Replayed
	// InProgress: another claim holds the key; the call reports it (after
	// waiting, with WithWait).
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
	// rules allow.
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

// Event is one thing the engine did with a key.
type Event struct {
	Kind EventKind
	// Ctx is the caller's context (for trace correlation); never nil.
	Ctx context.Context
	// Key is the store key, raw: the observer is the user's own code, and
	// must redact it before it reaches logs, metrics or traces (otelidem
	// does; see keyer.Redactor).
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
}

// Observer receives events synchronously, on the goroutine that caused them
// (the caller's or the heartbeat's). Keep it fast; use it for metrics and
// traces. It must not call the engine.
type Observer func(Event)

func (e *Engine) emit(ctx context.Context, ev Event) {
	if len(e.opts.observers) == 0 {
		return
	}
	ev.Ctx = ctx
	for _, o := range e.opts.observers {
		o(ev)
	}
}
