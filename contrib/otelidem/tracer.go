package otelidem

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idem"
)

var (
	_ idem.Tracer      = (*Telemetry)(nil)
	_ idem.EventTracer = (*Telemetry)(nil)
)

// run is the state of one run, carried in the context TraceRunStart
// returns: no map of keys, nothing to sweep.
type run struct {
	span trace.Span // idem.run: the parent of the claim, the work and the settle

	mu        sync.Mutex
	start     time.Time     // TraceRunStart
	claimEnd  time.Time     // when the latest claim call ended
	claimTook time.Duration // and how long it took
	held      bool          // acquired and not yet settled
	acquired  time.Time     // when the key was acquired
	flight    flightEntry   // its place among the runs in flight, while held
	settle    time.Time     // when the first settle call began (zero: not yet)
	outcome   string        // the claim's outcome, then the settle's
}

type runKey struct{}

func runFrom(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// TraceRunStart starts the run's span, "idem.run", a child of the caller's
// span (the request's, with otelhttp): the work runs in its context, so
// every span the work starts is a child of it.
func (t *Telemetry) TraceRunStart(ctx context.Context, s idem.RunStart) context.Context {
	now := t.now()
	r := &run{start: now}
	ctx, r.span = t.tracer.Start(ctx, "idem.run", trace.WithTimestamp(now), trace.WithSpanKind(trace.SpanKindInternal))
	if r.span.IsRecording() {
		r.span.SetAttributes(t.spanAttrs...)
		t.keyAttr(r.span, s.Key)
	}
	return context.WithValue(ctx, runKey{}, r)
}

// TraceRunEnd ends the run's span, with the run's last outcome and error; a
// run whose result could not be recorded (no settle event) is counted as
// failed here.
func (t *Telemetry) TraceRunEnd(ctx context.Context, end idem.RunEnd) {
	r := runFrom(ctx)
	if r == nil {
		return
	}
	now := t.now()
	r.mu.Lock()
	held := r.held
	r.mu.Unlock()
	if held {
		t.settled(ctx, r, idem.Event{Key: end.Key, Err: end.Err, Status: end.Status, Reason: end.Reason}, OutcomeFailed, now)
	}
	if !r.span.IsRecording() {
		r.span.End()
		return
	}
	r.mu.Lock()
	outcome := r.outcome
	r.mu.Unlock()
	if outcome != "" {
		r.span.SetAttributes(AttrOutcome.String(outcome))
	}
	if end.Status != 0 {
		r.span.SetAttributes(AttrStatus.Int(end.Status))
	}
	if end.Err != nil {
		r.span.RecordError(end.Err)
		r.span.SetStatus(codes.Error, end.Err.Error())
	}
	r.span.End(trace.WithTimestamp(now))
}

// TraceEvent records one engine event. It is called synchronously on the
// engine's goroutines and does not block.
func (t *Telemetry) TraceEvent(ctx context.Context, ev idem.Event) {
	r := runFrom(ctx)
	now := t.now()
	switch ev.Kind {
	case idem.StoreCall:
		t.storeCall(ctx, r, ev, now)
	case idem.StoreError:
		t.storeErrs.Add(ctx, 1, t.opSet(ev.Op).errors)
		switch ev.Op {
		case idem.OpClaim:
			t.claimed(ctx, r, ev, OutcomeStoreError, now)
		case idem.OpRelease:
			// A release that keeps failing leaves the key to its lease and
			// reports nothing more: the run ends here.
			t.settled(ctx, r, ev, OutcomeFailed, now)
		}
	case idem.Acquired:
		if ev.Attempt.Takeover {
			t.takeovers.Add(ctx, 1, t.common)
		}
		t.claimed(ctx, r, ev, OutcomeAcquired, now)
	case idem.Replayed:
		t.claimed(ctx, r, ev, OutcomeReplayed, now)
	case idem.InProgress:
		t.claimed(ctx, r, ev, OutcomeInProgress, now)
	case idem.Mismatch:
		t.claimed(ctx, r, ev, OutcomeMismatch, now)
	case idem.SlowClaim:
		t.claimed(ctx, r, ev, OutcomeSlowClaim, now)
	case idem.Waiting:
		t.waits.Add(ctx, 1, t.common)
	case idem.Renewed:
		t.renewals.Add(ctx, 1, t.common)
	case idem.Completed:
		if ev.NotKept {
			t.settled(ctx, r, ev, OutcomeNotKept, now)
		} else {
			t.settled(ctx, r, ev, OutcomeCompleted, now)
		}
	case idem.Released:
		t.settled(ctx, r, ev, OutcomeReleased, now)
	case idem.LeaseLost:
		t.settled(ctx, r, ev, OutcomeLeaseLost, now)
	case idem.Unknown:
		t.settled(ctx, r, ev, OutcomeUnknown, now)
	}
}

// opSets are the attribute sets of one store operation's measurements.
type opSets struct{ ok, failed, errors metric.MeasurementOption }

func (t *Telemetry) newOpSets(op string) *opSets {
	base := append(t.attrs(), AttrOp.String(op), t.storeAttrs)
	return &opSets{
		ok:     metric.WithAttributeSet(attribute.NewSet(append(base, AttrError.Bool(false))...)),
		failed: metric.WithAttributeSet(attribute.NewSet(append(base, AttrError.Bool(true))...)),
		errors: metric.WithAttributeSet(attribute.NewSet(base...)),
	}
}

// opSet returns the sets of op, made once per operation name.
func (t *Telemetry) opSet(op string) *opSets {
	if s, ok := t.ops[op]; ok {
		return s
	}
	if s, ok := t.extraOps.Load(op); ok {
		return s.(*opSets)
	}
	s, _ := t.extraOps.LoadOrStore(op, t.newOpSets(op))
	return s.(*opSets)
}

func (t *Telemetry) attrs() []attribute.KeyValue {
	return t.spanAttrs[: len(t.spanAttrs)-1 : len(t.spanAttrs)-1]
}

func (t *Telemetry) storeCall(ctx context.Context, r *run, ev idem.Event, now time.Time) {
	os := t.opSet(ev.Op)
	if ev.Err != nil {
		t.storeDur.Record(ctx, ev.Took.Seconds(), os.failed)
	} else {
		t.storeDur.Record(ctx, ev.Took.Seconds(), os.ok)
	}
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Op {
	case idem.OpClaim:
		r.claimEnd, r.claimTook = now, ev.Took
	case idem.OpComplete, idem.OpRelease:
		if r.held && r.settle.IsZero() {
			r.settle = now.Add(-ev.Took)
		}
	}
}

// claimed records a claim's outcome and its span, a child of the run's.
func (t *Telemetry) claimed(ctx context.Context, r *run, ev idem.Event, outcome string, now time.Time) {
	t.claims.Add(ctx, 1, t.outcomeSets[outcome])
	start := now
	if r != nil {
		r.mu.Lock()
		start = r.start
		if !r.claimEnd.IsZero() {
			start = r.claimEnd.Add(-r.claimTook)
		}
		r.outcome = outcome
		if outcome == OutcomeAcquired && !r.held {
			t.inflight.Add(ctx, 1, t.common)
			r.held, r.acquired, r.settle = true, now, time.Time{}
			t.flight.add(&r.flight, now)
		}
		r.mu.Unlock()
	}
	_, span := t.tracer.Start(ctx, "idem.claim", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(t.spanAttrs...)
	span.SetAttributes(AttrOutcome.String(outcome))
	t.keyAttr(span, ev.Key)
	if ev.Err != nil {
		span.RecordError(ev.Err)
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End(trace.WithTimestamp(now))
}

// settled records how a run ended: its durations, its span, and one run
// fewer in flight. The first settle event of a held key ends its run. A
// lease lost while the work ran is reported again when the work returns, and
// a release is retried on failure: those repeats (the run holds the key no
// more) are not counted again.
func (t *Telemetry) settled(ctx context.Context, r *run, ev idem.Event, outcome string, now time.Time) {
	var held bool
	var start, settle time.Time
	if r != nil {
		r.mu.Lock()
		if r.held {
			held, start, settle = true, r.acquired, r.settle
			r.held = false
			r.outcome = outcome
			t.flight.remove(&r.flight)
		}
		r.mu.Unlock()
	}
	if !held && (outcome == OutcomeFailed || outcome == OutcomeLeaseLost) {
		return // a repeat of a run already ended
	}
	t.settles.Add(ctx, 1, t.outcomeSets[outcome])
	if !held {
		return
	}
	t.inflight.Add(ctx, -1, t.common)
	workEnd := settle
	if workEnd.IsZero() {
		workEnd = now // no settle call (a rolled-back transaction): all work
	}
	t.workDur.Record(ctx, workEnd.Sub(start).Seconds(), t.outcomeSets[outcome])
	if !settle.IsZero() {
		t.settleDur.Record(ctx, now.Sub(settle).Seconds(), t.outcomeSets[outcome])
	}
	_, span := t.tracer.Start(ctx, "idem.settle", trace.WithTimestamp(workEnd), trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(t.spanAttrs...)
	span.SetAttributes(AttrOutcome.String(outcome))
	t.keyAttr(span, ev.Key)
	if ev.Reason != "" {
		span.SetAttributes(AttrReason.String(ev.Reason))
	}
	if ev.Status != 0 {
		span.SetAttributes(AttrStatus.Int(ev.Status))
	}
	if ev.Err != nil {
		span.RecordError(ev.Err)
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End(trace.WithTimestamp(now))
}

// observeOldest reports idem.inflight.oldest_age: how long ago the oldest
// run still holding its key acquired it, 0 when no run holds one.
func (t *Telemetry) observeOldest(_ context.Context, o metric.Float64Observer) error {
	age := 0.0
	if at, ok := t.flight.oldest(); ok {
		age = max(0, t.now().Sub(at).Seconds())
	}
	o.Observe(age, t.common)
	return nil
}

func (t *Telemetry) keyAttr(span trace.Span, key string) {
	if k := t.redact(key); k != "" {
		span.SetAttributes(AttrKey.String(k))
	}
}
