package idem

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// Defaults of the options.
const (
	// DefaultLease is how long a claim holds a key before it lapses unless
	// renewed. The engine renews it every lease/2 while the work runs, so it
	// bounds how long a crashed process keeps the key, not how long the work
	// may take.
	DefaultLease = 30 * time.Second
	// DefaultRetention is how long a completed key is remembered.
	DefaultRetention = 24 * time.Hour
	// DefaultWait is how long a call that finds its key in progress waits
	// for the other call to finish before it reports InProgress (HTTP 409,
	// dedup.InFlight, ErrInProgress). It is the same on every store, in lease
	// mode as in transactional mode: a duplicate of a request in flight waits
	// for it and replays its result.
	DefaultWait = 10 * time.Second
	// MinLease is the shortest lease New accepts.
	MinLease = time.Millisecond
	// MinDeadlineLease is the shortest lease WithLeaseFromDeadline gives a
	// run (unless WithLease's lease is shorter still): a caller whose
	// deadline has (nearly) passed still gets a lease that outlasts a few
	// round trips to the store.
	MinDeadlineLease = time.Second
	// DefaultMaxResponse is the largest response (or Do result) kept, in
	// bytes, unless a surface is told otherwise: see KeepUpTo.
	DefaultMaxResponse = 1 << 20
)

// Option configures an Engine. An option given an invalid value, or a nil
// Option, makes New fail with an error matching store.ErrInvalid; a value is
// never silently replaced by a default.
type Option func(*options) error

type options struct {
	lease     time.Duration
	margin    time.Duration // WithLeaseFromDeadline; 0: off
	retention time.Duration
	wait      time.Duration
	logger    *slog.Logger
	tracers   []Tracer
	redact    keyer.Redactor
}

// The default logger is slog.Default(), the process's own: what the engine
// logs is what no result can tell its caller (a renewal that failed, a
// result that could not be recorded, a commit whose outcome is unknown), and
// such a line must not vanish unless the user says so (WithLogger with a
// discarding logger).
func defaults() options {
	return options{
		lease:     DefaultLease,
		retention: DefaultRetention,
		wait:      DefaultWait,
		redact:    keyer.DefaultRedactor(),
	}
}

// WithLease sets how long a claim holds the key without renewal (default
// DefaultLease, at least MinLease). While the work runs and while its result
// is being recorded, the engine renews the lease every lease/2. It must
// outlast a few round trips to the store: a claim whose reply comes after
// half the lease is not acted on (see ErrSlowClaim).
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if d < MinLease {
			return fmt.Errorf("WithLease(%v): the lease must be at least %v", d, MinLease)
		}
		o.lease = d
		return nil
	}
}

// WithLeaseFromDeadline makes a run whose caller's context has a deadline
// hold its key for no longer than that deadline plus margin: the run's
// lease is the shorter of WithLease's lease and the time left before the
// deadline plus margin, and never shorter than MinDeadlineLease (or
// WithLease's lease, if that is shorter). The work's context ends at the
// caller's deadline, and margin is the time the result then has to be
// recorded; a process that dies meanwhile keeps the key only that long,
// not a whole WithLease. Everything the engine derives from the lease
// follows the run's (the renewal interval, the slow-claim rule, the
// bounds of recording the result). A caller without a deadline gets
// WithLease's lease, as without this option. margin must be positive.
func WithLeaseFromDeadline(margin time.Duration) Option {
	return func(o *options) error {
		if margin <= 0 {
			return fmt.Errorf("WithLeaseFromDeadline(%v): the margin must be positive", margin)
		}
		o.margin = margin
		return nil
	}
}

// leaseFor returns the lease of a run whose caller's context is ctx.
func (e *Engine) leaseFor(ctx context.Context) time.Duration {
	lease := e.opts.lease
	if e.opts.margin == 0 {
		return lease
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return lease
	}
	d := time.Until(deadline) + e.opts.margin
	return min(lease, max(d, MinDeadlineLease))
}

// WithRetention sets how long a completed key is remembered and its
// response replayed (default DefaultRetention). It must be positive.
func WithRetention(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("WithRetention(%v): the retention must be positive", d)
		}
		o.retention = d
		return nil
	}
}

// WithWait sets how long a call that finds its key in progress waits for
// the other call to finish (default DefaultWait): it polls with the engine's
// backoff (5 ms doubling to 100 ms), then replays the other call's result, or
// runs the work itself if the other call released the key. When the wait
// is over the call reports InProgress. WithWait(0) reports InProgress at
// once. The wait ends early when the caller's context ends. d must not be
// negative.
func WithWait(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("WithWait(%v): the wait must not be negative (0 reports in-progress keys at once)", d)
		}
		o.wait = d
		return nil
	}
}

// WithLogger sets the logger for what the caller cannot see in a result:
// failed renewals, retried completions, lost leases, unknown commits
// (default slog.Default(), read when the engine logs). Every surface built
// on the engine (httpidem, dedup, grpcidem, Do) logs through it. Lines carry
// the key redacted, under "key" (see WithKeyRedactor). Pass
// slog.New(slog.DiscardHandler) to log nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("WithLogger(nil): pass a logger, or slog.New(slog.DiscardHandler) to log nothing")
		}
		o.logger = l
		return nil
	}
}

// WithTracer adds a Tracer: it sees the start and the end of every run of
// every surface (HTTP requests, messages, Do and gRPC calls alike), and, if
// it implements EventTracer, every event in between. Several tracers may be
// added; they are called in the order given, as MultiTracer calls them.
func WithTracer(t Tracer) Option {
	return func(o *options) error {
		if t == nil {
			return fmt.Errorf("WithTracer(nil): pass a Tracer")
		}
		o.tracers = append(o.tracers, t)
		return nil
	}
}

// checkStore is shared by New and its callers.
func checkStore(s store.Store) error {
	if s == nil {
		return fmt.Errorf("nil store: %w", store.ErrInvalid)
	}
	return nil
}
