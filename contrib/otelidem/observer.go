package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idem"
)

// Observer returns the engine observer that records every event: pass it
// to idem.New with idem.WithObserver (httpidem and dedup accept the same
// option). It is called synchronously on the engine's goroutines and does
// not block.
func (t *Telemetry) Observer() idem.Observer {
	return t.observe
}

func (t *Telemetry) observe(ev idem.Event) {
	ctx := ev.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	now := t.now()
	switch ev.Kind {
	case idem.StoreCall:
		t.storeCall(ctx, ev, now)
	case idem.StoreError:
		t.storeErrs.Add(ctx, 1, t.opSet(ev.Op).errors)
		switch ev.Op {
		case idem.OpClaim:
			t.claimed(ctx, ev, OutcomeStoreError, now)
		case idem.OpRelease:
			// A release that keeps failing leaves the key to its lease and
			// reports nothing more: the run ends here.
			t.settled(ctx, ev, OutcomeFailed, now)
		}
	case idem.Acquired:
		t.claimed(ctx, ev, OutcomeAcquired, now)
	case idem.Replayed:
		t.claimed(ctx, ev, OutcomeReplayed, now)
	case idem.InProgress:
		t.claimed(ctx, ev, OutcomeInProgress, now)
	case idem.Mismatch:
		t.claimed(ctx, ev, OutcomeMismatch, now)
	case idem.SlowClaim:
		t.claimed(ctx, ev, OutcomeSlowClaim, now)
	case idem.Waiting:
		t.waits.Add(ctx, 1, t.common)
	case idem.Renewed:
		t.renewals.Add(ctx, 1, t.common)
	case idem.Completed:
		if ev.NotKept {
			t.settled(ctx, ev, OutcomeNotKept, now)
		} else {
			t.settled(ctx, ev, OutcomeCompleted, now)
		}
	case idem.Released:
		t.settled(ctx, ev, OutcomeReleased, now)
	case idem.LeaseLost:
		t.settled(ctx, ev, OutcomeLeaseLost, now)
	case idem.Unknown:
		t.settled(ctx, ev, OutcomeUnknown, now)
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

func (t *Telemetry) storeCall(ctx context.Context, ev idem.Event, now time.Time) {
	os := t.opSet(ev.Op)
	if ev.Err != nil {
		t.storeDur.Record(ctx, ev.Took.Seconds(), os.failed)
	} else {
		t.storeDur.Record(ctx, ev.Took.Seconds(), os.ok)
	}
	switch ev.Op {
	case idem.OpClaim:
		t.mu.Lock()
		st := t.state(ev.Key)
		st.claimEnd, st.claimTook = now, ev.Took
		t.mu.Unlock()
	case idem.OpComplete, idem.OpRelease:
		t.mu.Lock()
		if st := t.keys[ev.Key]; st != nil && st.held && st.settle.IsZero() {
			st.settle = now.Add(-ev.Took)
		}
		t.mu.Unlock()
	}
}

// state returns the key's state, creating it; t.mu is held.
func (t *Telemetry) state(key string) *keyState {
	st := t.keys[key]
	if st == nil {
		st = &keyState{}
		t.keys[key] = st
		t.sweeps++
		if t.sweeps >= 4096 {
			t.sweeps = 0
			t.sweep()
		}
	}
	return st
}

// sweep forgets keys whose last claim is older than maxAge: runs that never
// reported their settle, and claims whose outcome never came (a caller that
// left while waiting). t.mu is held.
func (t *Telemetry) sweep() {
	old := t.now().Add(-t.maxAge)
	for k, st := range t.keys {
		if st.claimEnd.Before(old) && (!st.held || st.start.Before(old)) {
			if st.held {
				t.inflight.Add(context.Background(), -1, t.common)
			}
			delete(t.keys, k)
		}
	}
}

// claimed records a claim's outcome and its span.
func (t *Telemetry) claimed(ctx context.Context, ev idem.Event, outcome string, now time.Time) {
	t.claims.Add(ctx, 1, t.outcomeSets[outcome])
	start := now
	t.mu.Lock()
	st := t.keys[ev.Key]
	if st != nil && !st.claimEnd.IsZero() {
		start = st.claimEnd.Add(-st.claimTook)
	}
	acquired := outcome == OutcomeAcquired
	switch {
	case acquired:
		if st == nil {
			st = t.state(ev.Key)
		}
		if !st.held {
			t.inflight.Add(ctx, 1, t.common)
		}
		// A takeover of a key whose first run still holds it replaces that
		// run: one key, one holder.
		st.held, st.start, st.settle = true, now, time.Time{}
	case st != nil && !st.held:
		delete(t.keys, ev.Key)
	}
	t.mu.Unlock()

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
// a release is retried on failure: those repeats (no run holds the key any
// more) are not counted again.
func (t *Telemetry) settled(ctx context.Context, ev idem.Event, outcome string, now time.Time) {
	t.mu.Lock()
	st := t.keys[ev.Key]
	var held bool
	var start, settle time.Time
	if st != nil && st.held {
		held, start, settle = true, st.start, st.settle
		delete(t.keys, ev.Key)
	}
	t.mu.Unlock()
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

func (t *Telemetry) keyAttr(span trace.Span, key string) {
	if k := t.redact(key); k != "" {
		span.SetAttributes(AttrKey.String(k))
	}
}
