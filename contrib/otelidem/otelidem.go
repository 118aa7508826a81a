package otelidem

import (
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/internal/invalid"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/idemkit/idemkit/contrib/otelidem"

// Attribute keys.
const (
	// AttrOutcome is the outcome of a claim, a settle or a purge run.
	AttrOutcome = attribute.Key("idem.outcome")
	// AttrOp names the store call (claim, renew, complete, release, tx).
	AttrOp = attribute.Key("idem.op")
	// AttrStore names the backend (WithBackend).
	AttrStore = attribute.Key("idem.store")
	// AttrKey is the store key on spans, as the Redactor writes it.
	AttrKey = attribute.Key("idem.key")
	// AttrReason explains a settle (released, lease lost, not kept).
	AttrReason = attribute.Key("idem.reason")
	// AttrStatus is the surface's status (the HTTP status) of a settle.
	AttrStatus = attribute.Key("idem.status")
	// AttrError says whether a store call failed.
	AttrError = attribute.Key("error")
	// AttrResult is ok or error for a purge run.
	AttrResult = attribute.Key("idem.result")
)

// durationBuckets suit calls from tens of microseconds (a memory store) to
// seconds (a slow settle), in seconds.
var durationBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// Option configures New.
type Option func(*config) error

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	backend string
	attrs   []attribute.KeyValue
	redact  keyer.Redactor
}

// WithMeterProvider sets where metrics go (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("nil MeterProvider")
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider sets where spans go (default otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("nil TracerProvider")
		}
		c.tp = tp
		return nil
	}
}

// WithBackend names the store in the idem.store attribute of store calls
// (for example "postgres"; Backend(s) derives it from a store). Default
// "unknown".
func WithBackend(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New("empty backend name")
		}
		c.backend = name
		return nil
	}
}

// WithAttributes adds attributes to every metric and span (for example
// attribute.String("idem.surface", "http")). Never put keys or other
// per-request values here: every distinct value is a new time series.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) error {
		c.attrs = append(c.attrs, attrs...)
		return nil
	}
}

// WithKeyRedactor sets how keys are written on spans (default
// keyer.DefaultRedactor(), an HMAC with a per-process secret; keyer.OmitKeys()
// leaves the attribute out; keyer.RawKeys() writes them as they are).
func WithKeyRedactor(r keyer.Redactor) Option {
	return func(c *config) error {
		if r == nil {
			return errors.New("nil Redactor")
		}
		c.redact = r
		return nil
	}
}

// Telemetry holds the instruments. Make one with New and give it to the
// engine as its tracer (idem.WithTracer(tel)); its PurgeObserver goes to the
// cleanup job. It is an idem.Tracer and an idem.EventTracer, safe for
// concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	redact keyer.Redactor
	now    func() time.Time

	common      metric.MeasurementOption
	storeAttrs  attribute.KeyValue
	claims      metric.Int64Counter
	settles     metric.Int64Counter
	waits       metric.Int64Counter
	renewals    metric.Int64Counter
	inflight    metric.Int64UpDownCounter
	takeovers   metric.Int64Counter
	flight      flight // the runs holding a key, for idem.inflight.oldest_age
	workDur     metric.Float64Histogram
	settleDur   metric.Float64Histogram
	storeDur    metric.Float64Histogram
	storeErrs   metric.Int64Counter
	purged      metric.Int64Counter
	purgeRuns   metric.Int64Counter
	purgeDur    metric.Float64Histogram
	spanAttrs   []attribute.KeyValue
	outcomeSets map[string]metric.MeasurementOption

	ops      map[string]*opSets // the engine's operations, made by New
	extraOps sync.Map           // any other operation name: string → *opSets
}

// New makes the instruments. It fails with an error matching
// store.ErrInvalid when an option is invalid, or with the SDK's error when
// an instrument cannot be made.
func New(opts ...Option) (*Telemetry, error) {
	c := config{backend: "unknown"}
	if err := invalid.Apply(&c, opts); err != nil {
		return nil, fmt.Errorf("otelidem: new: %w", err)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.redact == nil {
		c.redact = keyer.DefaultRedactor()
	}
	m := c.mp.Meter(ScopeName)
	t := &Telemetry{
		tracer:     c.tp.Tracer(ScopeName),
		redact:     c.redact,
		now:        time.Now,
		common:     metric.WithAttributes(c.attrs...),
		storeAttrs: AttrStore.String(c.backend),
		spanAttrs:  append(append([]attribute.KeyValue(nil), c.attrs...), AttrStore.String(c.backend)),
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return i
	}
	t.claims = counter("idem.claims", "{claim}", "Claims of an idempotency key, by outcome (in_progress is HTTP 409, mismatch is HTTP 422).")
	t.settles = counter("idem.settles", "{run}", "Runs settled after the work ran, by outcome.")
	t.waits = counter("idem.waits", "{claim}", "Claims that found their key in progress and waited for it.")
	t.renewals = counter("idem.renewals", "{renewal}", "Lease renewals while work ran or its result was recorded.")
	t.storeErrs = counter("idem.store.errors", "{call}", "Store calls that failed, by operation.")
	t.purged = counter("idem.purge.deleted", "{record}", "Records the cleanup job deleted.")
	t.purgeRuns = counter("idem.purge.runs", "{run}", "Runs of the cleanup job, by result.")
	t.workDur = histogram("idem.work.duration", "Time from acquiring a key to the first call that settles it.")
	t.settleDur = histogram("idem.settle.duration", "Time to settle a key after its work ran (retries and commit included).")
	t.storeDur = histogram("idem.store.duration", "Duration of store calls, by operation and backend.")
	t.purgeDur = histogram("idem.purge.duration", "Duration of the cleanup job's runs.")
	t.takeovers = counter("idem.takeovers", "{claim}",
		"Claims that took a key over from a holder whose lease lapsed before it completed: its work may have run (idem.Attempt.Takeover).")
	var err error
	t.inflight, err = m.Int64UpDownCounter("idem.inflight", metric.WithUnit("{run}"),
		metric.WithDescription("Runs holding a key: acquired and not yet settled."))
	errs = append(errs, err)
	_, err = m.Float64ObservableGauge("idem.inflight.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest run holding a key, from its claim to now (0 when none does): a work that runs far longer than its lease is hung or stuck."),
		metric.WithFloat64Callback(t.observeOldest))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelidem: new: %w", err)
	}
	t.ops = map[string]*opSets{}
	for _, op := range []string{idem.OpClaim, idem.OpRenew, idem.OpComplete, idem.OpRelease, idem.OpTx} {
		t.ops[op] = t.newOpSets(op)
	}
	t.outcomeSets = map[string]metric.MeasurementOption{}
	for _, o := range []string{
		OutcomeAcquired, OutcomeReplayed, OutcomeInProgress, OutcomeMismatch, OutcomeSlowClaim, OutcomeStoreError,
		OutcomeCompleted, OutcomeNotKept, OutcomeReleased, OutcomeLeaseLost, OutcomeUnknown, OutcomeFailed,
	} {
		t.outcomeSets[o] = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{AttrOutcome.String(o)}, c.attrs...)...))
	}
	return t, nil
}

// Outcomes in the idem.outcome attribute.
const (
	OutcomeAcquired   = "acquired"
	OutcomeReplayed   = "replayed"
	OutcomeInProgress = "in_progress"
	OutcomeMismatch   = "mismatch"
	OutcomeSlowClaim  = "slow_claim"
	OutcomeStoreError = "store_error"
	OutcomeCompleted  = "completed"
	OutcomeNotKept    = "not_kept"
	OutcomeReleased   = "released"
	OutcomeLeaseLost  = "lease_lost"
	OutcomeUnknown    = "unknown"
	OutcomeFailed     = "failed"
)

// Backend names a store for WithBackend from its type: the last element of
// its package path ("postgres" for *postgres.Store), or "unknown" for nil.
func Backend(s store.Store) string {
	if s == nil {
		return "unknown"
	}
	t := reflect.TypeOf(s)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	if p == "" {
		return t.String()
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}
