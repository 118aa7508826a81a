package otelidem_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

func newEngine(t *testing.T, h *harness, s store.Store, opts ...idem.Option) *idem.Engine {
	t.Helper()
	e, err := idem.New(s, append([]idem.Option{idem.WithTracer(h.tel), idem.WithWait(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newMemory(t *testing.T) *memory.Store {
	t.Helper()
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestScriptedRunCountsExactly drives the engine through N first runs, M
// replays, one run found in progress, one mismatch and one release, and
// reads every count back.
func TestScriptedRunCountsExactly(t *testing.T) {
	const N, M = 7, 4
	h := newHarness(t, otelidem.WithBackend("memory"))
	e := newEngine(t, h, newMemory(t))
	ctx := context.Background()
	keep := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }

	for i := range N {
		if r, err := e.Run(ctx, fmt.Sprintf("k%d", i), "fp", keep); err != nil || r.Outcome != store.Acquired {
			t.Fatalf("first run %d: %v %v", i, r.Outcome, err)
		}
	}
	for i := range M {
		if r, err := e.Run(ctx, fmt.Sprintf("k%d", i%N), "fp", keep); err != nil || !r.Replay() {
			t.Fatalf("replay %d: %v %v", i, r.Outcome, err)
		}
	}
	// One mismatch: k0 with another fingerprint.
	if r, err := e.Run(ctx, "k0", "other", keep); err != nil || r.Outcome != store.Mismatch {
		t.Fatalf("mismatch: %v %v", r.Outcome, err)
	}
	// One release.
	if r, err := e.Run(ctx, "declined", "fp", func(context.Context) idem.Verdict { return idem.Discard("declined") }); err != nil || r.Settle != idem.SettleReleased {
		t.Fatalf("release: %+v %v", r, err)
	}
	// One in progress: a run holds "slow" while another claims it; in
	// flight is 1 meanwhile.
	entered, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, "slow", "fp", func(context.Context) idem.Verdict {
			close(entered)
			<-finish
			return idem.Keep(nil)
		})
		done <- err
	}()
	<-entered
	if r, err := e.Run(ctx, "slow", "fp", keep); err != nil || r.Outcome != store.InProgress {
		t.Fatalf("in progress: %v %v", r.Outcome, err)
	}
	if n := sum(t, h.metrics(t), "idem.inflight"); n != 1 {
		t.Fatalf("in flight while one run holds a key: %d, want 1", n)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ms := h.metrics(t)
	claims := map[string]int64{
		otelidem.OutcomeAcquired:   N + 2, // the first runs, "declined" and "slow"
		otelidem.OutcomeReplayed:   M,
		otelidem.OutcomeInProgress: 1,
		otelidem.OutcomeMismatch:   1,
		otelidem.OutcomeSlowClaim:  0,
		otelidem.OutcomeStoreError: 0,
	}
	for o, want := range claims {
		if got := sum(t, ms, "idem.claims", outcome(o)); got != want {
			t.Errorf("idem.claims{%s} = %d, want %d", o, got, want)
		}
	}
	settles := map[string]int64{
		otelidem.OutcomeCompleted: N + 1,
		otelidem.OutcomeReleased:  1,
		otelidem.OutcomeLeaseLost: 0,
	}
	for o, want := range settles {
		if got := sum(t, ms, "idem.settles", outcome(o)); got != want {
			t.Errorf("idem.settles{%s} = %d, want %d", o, got, want)
		}
	}
	if n := sum(t, ms, "idem.inflight"); n != 0 {
		t.Errorf("in flight after every run settled: %d", n)
	}
	runs := uint64(N + 2)
	if n, _ := hist(t, ms, "idem.work.duration"); n != runs {
		t.Errorf("idem.work.duration has %d points, want %d", n, runs)
	}
	if n, _ := hist(t, ms, "idem.settle.duration"); n != runs {
		t.Errorf("idem.settle.duration has %d points, want %d", n, runs)
	}
	calls := N + M + 1 + 1 + 2 // every Run claims once
	store := otelidem.AttrStore.String("memory")
	if n, _ := hist(t, ms, "idem.store.duration", otelidem.AttrOp.String("claim"), store); n != uint64(calls) {
		t.Errorf("claim calls timed: %d, want %d", n, calls)
	}
	if n, _ := hist(t, ms, "idem.store.duration", otelidem.AttrOp.String("complete"), store); n != uint64(N+1) {
		t.Errorf("complete calls timed: %d, want %d", n, N+1)
	}
	if n, _ := hist(t, ms, "idem.store.duration", otelidem.AttrOp.String("release"), store); n != 1 {
		t.Errorf("release calls timed: %d, want 1", n)
	}
}

// TestWorkDurationIsTheWork: the work sleeps (the real clock is the
// subject) and idem.work.duration says at least that long.
func TestWorkDurationIsTheWork(t *testing.T) {
	h := newHarness(t)
	e := newEngine(t, h, newMemory(t))
	const nap = 30 * time.Millisecond
	if _, err := e.Run(context.Background(), "k", "fp", func(context.Context) idem.Verdict {
		time.Sleep(nap)
		return idem.Keep(nil)
	}); err != nil {
		t.Fatal(err)
	}
	n, s := hist(t, h.metrics(t), "idem.work.duration", outcome(otelidem.OutcomeCompleted))
	if n != 1 || s < nap.Seconds() || s > 5 {
		t.Fatalf("work duration: %d points, %vs; want 1 point of at least %v", n, s, nap)
	}
}

// TestSpansAreChildrenOfTheCaller: a run span per run under the caller's
// span, and under it a claim span and a settle span, with the outcome and
// the hashed key.
func TestSpansAreChildrenOfTheCaller(t *testing.T) {
	h := newHarness(t)
	e := newEngine(t, h, newMemory(t))
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "request")
	keep := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }
	if _, err := e.Run(ctx, "4:acme|3:k-1", "fp", keep); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, "4:acme|3:k-1", "fp", keep); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, "4:acme|3:k-2", "fp", func(context.Context) idem.Verdict { return idem.Discard("declined").WithStatus(502) }); err != nil {
		t.Fatal(err)
	}
	parent.End()

	type span struct{ name, outcome string }
	var got []span
	hashed := map[string]bool{keyer.DefaultRedactor()("4:acme|3:k-1"): true, keyer.DefaultRedactor()("4:acme|3:k-2"): true}
	runs := map[string]bool{}
	for _, s := range h.spans.Ended() {
		if s.Name() == "idem.run" {
			runs[s.SpanContext().SpanID().String()] = true
		}
	}
	for _, s := range h.spans.Ended() {
		if s.Name() == "request" {
			continue
		}
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %s is not in the caller's trace", s.Name())
		}
		if s.Name() == "idem.run" && s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %s is not a child of the caller's span", s.Name())
		}
		if s.Name() != "idem.run" && !runs[s.Parent().SpanID().String()] {
			t.Errorf("span %s is not a child of a run span", s.Name())
		}
		o, _ := spanAttr(s, otelidem.AttrOutcome)
		got = append(got, span{s.Name(), o.AsString()})
		k, ok := spanAttr(s, otelidem.AttrKey)
		if !ok || strings.Contains(k.AsString(), "acme") || !strings.HasPrefix(k.AsString(), "hmac:") {
			t.Errorf("span %s key attribute %q: want a hash", s.Name(), k.AsString())
		}
		if s.EndTime().Before(s.StartTime()) {
			t.Errorf("span %s ends before it starts", s.Name())
		}
		if !hashed[k.AsString()] {
			t.Errorf("span %s key %q is not the process hash of either key", s.Name(), k.AsString())
		}
		if s.Name() == "idem.settle" && o.AsString() == otelidem.OutcomeReleased {
			if st, _ := spanAttr(s, otelidem.AttrStatus); st.AsInt64() != 502 {
				t.Errorf("released settle span status %v, want 502", st.AsInt64())
			}
			if r, _ := spanAttr(s, otelidem.AttrReason); r.AsString() != "declined" {
				t.Errorf("released settle span reason %q", r.AsString())
			}
		}
	}
	want := []span{
		{"idem.claim", "acquired"}, {"idem.settle", "completed"}, {"idem.run", "completed"},
		{"idem.claim", "replayed"}, {"idem.run", "replayed"},
		{"idem.claim", "acquired"}, {"idem.settle", "released"}, {"idem.run", "released"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
}

func TestKeyRedactorOptions(t *testing.T) {
	for name, c := range map[string]struct {
		r    keyer.Redactor
		want string // "" = no attribute
	}{
		"raw":  {keyer.RawKeys(), "4:acme|1:k"},
		"omit": {keyer.OmitKeys(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, otelidem.WithKeyRedactor(c.r))
			e := newEngine(t, h, newMemory(t))
			if _, err := e.Run(context.Background(), "4:acme|1:k", "fp", func(context.Context) idem.Verdict { return idem.Keep(nil) }); err != nil {
				t.Fatal(err)
			}
			spans := h.spans.Ended()
			if len(spans) != 3 {
				t.Fatalf("%d spans, want 3 (run, claim, settle)", len(spans))
			}
			for _, s := range spans {
				v, ok := spanAttr(s, otelidem.AttrKey)
				if c.want == "" && ok {
					t.Errorf("%s has key %q; want none", s.Name(), v.AsString())
				}
				if c.want != "" && v.AsString() != c.want {
					t.Errorf("%s has key %q; want %q", s.Name(), v.AsString(), c.want)
				}
			}
		})
	}
}

// failingStore fails every call.
type failingStore struct{ store.Store }

var errDown = errors.New("store is down")

func (failingStore) Claim(context.Context, string, string, store.Token, time.Duration) (store.Claim, error) {
	return store.Claim{}, errDown
}

func TestStoreErrorIsCountedAndTraced(t *testing.T) {
	h := newHarness(t, otelidem.WithBackend("fake"))
	e := newEngine(t, h, failingStore{})
	if _, err := e.Run(context.Background(), "k", "fp", func(context.Context) idem.Verdict { return idem.Keep(nil) }); !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Run on a failing store: %v", err)
	}
	ms := h.metrics(t)
	if n := sum(t, ms, "idem.claims", outcome(otelidem.OutcomeStoreError)); n != 1 {
		t.Errorf("idem.claims{store_error} = %d, want 1", n)
	}
	if n := sum(t, ms, "idem.store.errors", otelidem.AttrOp.String("claim"), otelidem.AttrStore.String("fake")); n != 1 {
		t.Errorf("idem.store.errors{claim, fake} = %d, want 1", n)
	}
	if n, _ := hist(t, ms, "idem.store.duration", otelidem.AttrError.Bool(true)); n != 1 {
		t.Errorf("failed store calls timed: %d, want 1", n)
	}
	spans := h.spans.Ended()
	if len(spans) != 2 || spans[0].Name() != "idem.claim" || spans[0].Status().Code != codes.Error || spans[1].Status().Code != codes.Error {
		t.Fatalf("spans %v: want a claim span and its run span, both with an error status", spans)
	}
}

// TestWorkSpansAreChildrenOfTheRun: a span the work starts is a child of
// otelidem's run span, itself a child of the caller's span, in lease mode
// and in transactional mode.
func TestWorkSpansAreChildrenOfTheRun(t *testing.T) {
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	if err := sq.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		s    store.Store
		opts []idem.RunOption
	}{"lease": {newMemory(t), nil}, "transactional": {sq, []idem.RunOption{idem.InTx()}}} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			e := newEngine(t, h, c.s)
			ctx, parent := h.tp.Tracer("test").Start(context.Background(), "request")
			if _, err := e.Run(ctx, "k-work", "fp", func(ctx context.Context) idem.Verdict {
				_, span := h.tp.Tracer("test").Start(ctx, "charge")
				span.End()
				return idem.Keep(nil)
			}, c.opts...); err != nil {
				t.Fatal(err)
			}
			parent.End()
			byName := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range h.spans.Ended() {
				byName[s.Name()] = s
			}
			run, work := byName["idem.run"], byName["charge"]
			if run == nil || work == nil {
				t.Fatalf("spans %v: want idem.run and charge", h.spans.Ended())
			}
			if work.Parent().SpanID() != run.SpanContext().SpanID() {
				t.Errorf("the work's span is not a child of idem.run")
			}
			if run.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("idem.run is not a child of the caller's span")
			}
		})
	}
}

// TestConcurrentRunsOneKey: ten goroutines run one key at once (-race);
// exactly one acquires, and every claim is counted once.
func TestConcurrentRunsOneKey(t *testing.T) {
	h := newHarness(t)
	e := newEngine(t, h, newMemory(t))
	const n = 10
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e.Run(context.Background(), "same", "fp", func(context.Context) idem.Verdict { return idem.Keep([]byte("x")) })
		}()
	}
	close(start)
	wg.Wait()
	ms := h.metrics(t)
	acq := sum(t, ms, "idem.claims", outcome(otelidem.OutcomeAcquired))
	rest := sum(t, ms, "idem.claims", outcome(otelidem.OutcomeReplayed)) + sum(t, ms, "idem.claims", outcome(otelidem.OutcomeInProgress))
	if acq != 1 || acq+rest != n {
		t.Fatalf("acquired %d, replayed or in progress %d; want 1 and %d", acq, rest, n-1)
	}
	if f := sum(t, ms, "idem.inflight"); f != 0 {
		t.Fatalf("in flight %d after all settled", f)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]otelidem.Option{
		"nil option":          nil,
		"nil meter provider":  otelidem.WithMeterProvider(nil),
		"nil tracer provider": otelidem.WithTracerProvider(nil),
		"empty backend":       otelidem.WithBackend(""),
		"nil redactor":        otelidem.WithKeyRedactor(nil),
	} {
		if _, err := otelidem.New(o); !errors.Is(err, store.ErrInvalid) || !strings.HasPrefix(err.Error(), "otelidem: new: ") {
			t.Errorf("%s: %v, want otelidem: new: … store.ErrInvalid", name, err)
		}
	}
}

func TestBackend(t *testing.T) {
	if b := otelidem.Backend(newMemory(t)); b != "memory" {
		t.Errorf("Backend(memory) = %q", b)
	}
	if b := otelidem.Backend(nil); b != "unknown" {
		t.Errorf("Backend(nil) = %q", b)
	}
}
