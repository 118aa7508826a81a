package otelidem_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// gauge returns the value of a float64 gauge's only point, and false when
// it has none.
func gauge(t *testing.T, ms map[string]metricdata.Metrics, name string) (float64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is %T, not a float64 gauge", name, m.Data)
	}
	if len(g.DataPoints) != 1 {
		t.Fatalf("%s has %d points, want 1", name, len(g.DataPoints))
	}
	return g.DataPoints[0].Value, true
}

// clock is a settable clock for otelidem.SetNow.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// fakeRun drives one run through the tracer API as the engine would.
type fakeRun struct {
	tel *otelidem.Telemetry
	ctx context.Context
	key string
}

func startRun(tel *otelidem.Telemetry, key string) *fakeRun {
	return &fakeRun{tel: tel, key: key, ctx: tel.TraceRunStart(context.Background(), idem.RunStart{Key: key})}
}

func (r *fakeRun) event(kind idem.EventKind, a idem.Attempt) {
	r.tel.TraceEvent(r.ctx, idem.Event{Kind: kind, Key: r.key, Attempt: a})
}

func (r *fakeRun) end() { r.tel.TraceRunEnd(r.ctx, idem.RunEnd{Key: r.key}) }

// TestTakeoversCounted: idem.takeovers counts the Acquired events whose
// attempt is a takeover, and nothing else.
func TestTakeoversCounted(t *testing.T) {
	h := newHarness(t)
	first := idem.Attempt{Number: 1, Fence: 10}
	for i, a := range []idem.Attempt{first, {Number: 2, Fence: 11, Takeover: true}, first, {Number: 5, Fence: 30, Takeover: true}} {
		r := startRun(h.tel, fmt.Sprintf("k%d", i))
		r.event(idem.Acquired, a)
		r.event(idem.Completed, idem.Attempt{})
		r.end()
	}
	// Other kinds never count, whatever they carry.
	r := startRun(h.tel, "replayed")
	r.event(idem.Replayed, idem.Attempt{Number: 2, Takeover: true})
	r.end()
	ms := h.metrics(t)
	if n := sum(t, ms, "idem.takeovers"); n != 2 {
		t.Errorf("idem.takeovers = %d, want 2", n)
	}
	if n := sum(t, ms, "idem.claims", outcome(otelidem.OutcomeAcquired)); n != 4 {
		t.Errorf("acquired claims = %d, want 4 (takeovers are acquired claims too)", n)
	}
	if m := ms["idem.takeovers"]; m.Unit != "{claim}" || m.Description == "" {
		t.Errorf("idem.takeovers unit %q, description %q", m.Unit, m.Description)
	}
}

// TestTakeoverThroughTheEngine: a key whose holder's lease lapsed is taken
// over by the next run, which the engine reports and the counter counts.
func TestTakeoverThroughTheEngine(t *testing.T) {
	h := newHarness(t)
	c := storetest.NewManualClock(time.Now())
	s, err := memory.New(memory.WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := newEngine(t, h, s)
	// A holder that crashed: claimed, never completed.
	if _, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Second); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Second)
	var got idem.Attempt
	r, err := e.Run(t.Context(), "k", "fp", func(ctx context.Context) idem.Verdict {
		got, _ = idem.AttemptFrom(ctx)
		return idem.Keep([]byte("ok"))
	})
	if err != nil || r.Outcome != store.Acquired {
		t.Fatalf("Run over a lapsed key = %v, %v", r.Outcome, err)
	}
	if !got.Takeover || got.Number != 2 {
		t.Errorf("the work's attempt = %+v, want a takeover, number 2", got)
	}
	if n := sum(t, h.metrics(t), "idem.takeovers"); n != 1 {
		t.Errorf("idem.takeovers = %d, want 1", n)
	}
}

// TestOldestInFlightAge: the gauge reports the age of the oldest run that
// holds its key, whichever way the older runs end, and 0 when none does.
func TestOldestInFlightAge(t *testing.T) {
	h := newHarness(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &clock{now: t0}
	otelidem.SetNow(h.tel, c.Now)
	age := func() float64 {
		t.Helper()
		v, ok := gauge(t, h.metrics(t), "idem.inflight.oldest_age")
		if !ok {
			t.Fatal("no idem.inflight.oldest_age point")
		}
		return v
	}
	if a := age(); a != 0 {
		t.Errorf("age with nothing in flight = %v, want 0", a)
	}
	// Three runs acquire a second apart; a fourth only replays, a fifth
	// finds its key in progress: neither holds a key.
	var runs []*fakeRun
	for i := range 3 {
		c.Set(t0.Add(time.Duration(i) * time.Second))
		r := startRun(h.tel, fmt.Sprintf("k%d", i))
		r.event(idem.Acquired, idem.Attempt{Number: 1})
		runs = append(runs, r)
	}
	// A repeated Acquired (no engine does it) does not move the first's age.
	runs[0].event(idem.Acquired, idem.Attempt{Number: 1})
	replay := startRun(h.tel, "done")
	replay.event(idem.Replayed, idem.Attempt{})
	busy := startRun(h.tel, "k1")
	busy.event(idem.InProgress, idem.Attempt{})
	c.Set(t0.Add(10 * time.Second))
	if a := age(); a != 10 {
		t.Errorf("age = %v, want 10 (the first run, acquired at t0)", a)
	}
	replay.end()
	busy.end()

	// The oldest completes: the next oldest is 9 s old.
	runs[0].event(idem.Completed, idem.Attempt{})
	runs[0].end()
	if a := age(); a != 9 {
		t.Errorf("age after the oldest completed = %v, want 9", a)
	}
	// The newest loses its lease: the oldest is unchanged.
	runs[2].event(idem.LeaseLost, idem.Attempt{})
	if a := age(); a != 9 {
		t.Errorf("age after the newest lost its lease = %v, want 9", a)
	}
	runs[2].end()
	// The last ends without a settle event (its result could not be
	// recorded): nothing holds a key.
	c.Set(t0.Add(20 * time.Second))
	if a := age(); a != 19 {
		t.Errorf("age = %v, want 19", a)
	}
	runs[1].end()
	if a := age(); a != 0 {
		t.Errorf("age with every run ended = %v, want 0", a)
	}
	if n := otelidem.HeldRuns(h.tel); n != 0 {
		t.Errorf("%d runs still tracked after every run ended", n)
	}
	ms := h.metrics(t)
	if m := ms["idem.inflight.oldest_age"]; m.Unit != "s" || m.Description == "" {
		t.Errorf("idem.inflight.oldest_age unit %q, description %q", m.Unit, m.Description)
	}
	if n := sum(t, ms, "idem.inflight"); n != 0 {
		t.Errorf("idem.inflight = %d, want 0", n)
	}
}

// TestOldestInFlightAgeEngine: a run held in its work is the oldest in
// flight for as long as it runs; released, nothing is.
func TestOldestInFlightAgeEngine(t *testing.T) {
	h := newHarness(t)
	e := newEngine(t, h, newMemory(t))
	entered, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), "slow", "fp", func(context.Context) idem.Verdict {
			close(entered)
			<-finish
			return idem.Discard("declined")
		})
		done <- err
	}()
	<-entered
	time.Sleep(30 * time.Millisecond)
	if v, _ := gauge(t, h.metrics(t), "idem.inflight.oldest_age"); v < 0.03 || v > 60 {
		t.Errorf("age of a run held 30 ms = %v s", v)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _ := gauge(t, h.metrics(t), "idem.inflight.oldest_age"); v != 0 {
		t.Errorf("age after the run was released = %v, want 0", v)
	}
}

// TestInFlightTrackerUnderLoad: many runs acquire and end at once, in every
// order; the tracker ends empty, so its memory is that of the runs in flight.
func TestInFlightTrackerUnderLoad(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				r := startRun(h.tel, fmt.Sprintf("g%d-%d", g, i))
				r.event(idem.Acquired, idem.Attempt{Number: 1})
				switch i % 4 {
				case 0:
					r.event(idem.Completed, idem.Attempt{})
				case 1:
					r.event(idem.Released, idem.Attempt{})
				case 2:
					r.event(idem.LeaseLost, idem.Attempt{})
				}
				if i%50 == 0 {
					var rm metricdata.ResourceMetrics
					h.reader.Collect(context.Background(), &rm) // a collection racing the runs
				}
				r.end()
			}
		})
	}
	wg.Wait()
	if n := otelidem.HeldRuns(h.tel); n != 0 {
		t.Errorf("%d runs still tracked after every run ended", n)
	}
	if v, _ := gauge(t, h.metrics(t), "idem.inflight.oldest_age"); v != 0 {
		t.Errorf("age after every run ended = %v, want 0", v)
	}
}
