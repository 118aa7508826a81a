package purge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// clock is a settable clock for the stores that take one.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fill completes n keys named prefix-i with the given retention and response.
func fill(t *testing.T, s store.Store, prefix string, n int, retention time.Duration, resp []byte) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		tok := store.NewToken()
		c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		if err != nil || c.Outcome != store.Acquired {
			t.Fatalf("claim %s: %v %v", key, c.Outcome, err)
		}
		if err := s.Complete(ctx, key, tok, resp, retention); err != nil {
			t.Fatalf("complete %s: %v", key, err)
		}
	}
}

// results collects the job's results on a channel.
func results() (purge.Option, <-chan purge.Result) {
	ch := make(chan purge.Result, 64)
	return purge.WithObserver(func(_ context.Context, r purge.Result) {
		select {
		case ch <- r:
		default:
		}
	}), ch
}

func receive(t *testing.T, ch <-chan purge.Result) purge.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no purge run within 10s")
	}
	return purge.Result{}
}

// runJob starts j.Run and returns a stop function that cancels it and
// waits for Run to return.
func runJob(t *testing.T, j *purge.Job) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { wait(t, cancel, done) }) }
	t.Cleanup(stop)
	return stop
}

func wait(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

func TestJobPurgesMemoryStore(t *testing.T) {
	clk := newClock()
	s, err := memory.New(memory.WithClock(clk.Now), memory.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fill(t, s, "old", 300, time.Minute, []byte("resp"))
	fill(t, s, "live", 40, 24*time.Hour, []byte("resp"))
	clk.Advance(2 * time.Minute)

	obs, ch := results()
	j, err := purge.New(s, purge.WithInterval(time.Hour), obs, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, j)
	r := receive(t, ch)
	if r.Err != nil || r.Deleted != 300 {
		t.Fatalf("first run: deleted %d, err %v; want 300, nil", r.Deleted, r.Err)
	}
	if n := s.Len(); n != 40 {
		t.Fatalf("store holds %d records after the purge, want 40", n)
	}
	for i := range 40 {
		if _, err := s.Get(context.Background(), fmt.Sprintf("live-%d", i)); err != nil {
			t.Fatalf("live record %d: %v", i, err)
		}
	}
}

func TestJobRunsEveryInterval(t *testing.T) {
	var calls atomic.Int64
	p := purgerFunc(func(context.Context) (int64, error) { return calls.Add(1), nil })
	obs, ch := results()
	j, err := purge.New(p, purge.WithInterval(2*time.Millisecond), purge.WithJitter(0.5), obs,
		purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	stop := runJob(t, j)
	for want := int64(1); want <= 5; want++ {
		if r := receive(t, ch); r.Deleted != want || r.Err != nil {
			t.Fatalf("run %d: %+v", want, r)
		}
	}
	stop()
	after := calls.Load()
	if after < 5 {
		t.Fatalf("%d runs", after)
	}
	// Once Run has returned, no run starts any more: Run's goroutine is gone
	// (TestMain's leak check would also catch it).
	if got := calls.Load(); got != after {
		t.Fatalf("a run started after Run returned (%d, then %d)", after, got)
	}
}

func TestJobDelayedStart(t *testing.T) {
	var calls atomic.Int64
	p := purgerFunc(func(context.Context) (int64, error) { calls.Add(1); return 0, nil })
	j, err := purge.New(p, purge.WithInterval(time.Hour), purge.WithDelayedStart())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("a delayed job ran %d times within its first interval", n)
	}
}

func TestJobStopsWithContextMidRun(t *testing.T) {
	entered := make(chan struct{})
	p := purgerFunc(func(ctx context.Context) (int64, error) {
		close(entered)
		<-ctx.Done()
		return 7, fmt.Errorf("fake: purge: %w", ctx.Err())
	})
	obs, ch := results()
	j, err := purge.New(p, purge.WithInterval(time.Hour), obs, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	stop := runJob(t, j)
	<-entered
	stop()
	r := receive(t, ch)
	if !errors.Is(r.Err, context.Canceled) || r.Deleted != 7 {
		t.Fatalf("cancelled run reported %+v, want 7 deleted and context.Canceled", r)
	}
}

func TestJobReportsErrorsAndGoesOn(t *testing.T) {
	boom := errors.New("database is on fire")
	var calls atomic.Int64
	p := purgerFunc(func(context.Context) (int64, error) {
		if calls.Add(1) == 1 {
			return 3, fmt.Errorf("fake: purge: %w", boom)
		}
		return 5, nil
	})
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	obs, ch := results()
	j, err := purge.New(p, purge.WithInterval(time.Millisecond), obs, purge.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	stop := runJob(t, j)
	first, second := receive(t, ch), receive(t, ch)
	stop()
	if !errors.Is(first.Err, boom) || first.Deleted != 3 {
		t.Fatalf("first run %+v, want 3 deleted and the error", first)
	}
	if second.Err != nil || second.Deleted != 5 {
		t.Fatalf("the run after a failure: %+v, want 5 deleted", second)
	}
	log := buf.String()
	for _, want := range []string{"level=WARN msg=\"purge: run failed\" deleted=3", "database is on fire", "level=INFO msg=\"purge: deleted expired records\" deleted=5"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestJobTimeoutBoundsARun(t *testing.T) {
	p := purgerFunc(func(ctx context.Context) (int64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	j, err := purge.New(p, purge.WithInterval(time.Hour), purge.WithTimeout(20*time.Millisecond),
		purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	r := j.Once(context.Background())
	if !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("a run past its timeout: %v, want DeadlineExceeded", r.Err)
	}
	if r.Took < 20*time.Millisecond || r.Took > 5*time.Second {
		t.Fatalf("the run took %v, want about 20ms", r.Took)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	var calls atomic.Int64
	p := purgerFunc(func(context.Context) (int64, error) { calls.Add(1); return 0, nil })
	cases := map[string][]purge.Option{
		"zero interval":     {purge.WithInterval(0)},
		"negative interval": {purge.WithInterval(-time.Second)},
		"negative jitter":   {purge.WithJitter(-0.1)},
		"jitter 1":          {purge.WithJitter(1)},
		"jitter NaN":        {purge.WithJitter(math.NaN())},
		"zero timeout":      {purge.WithTimeout(0)},
		"nil logger":        {purge.WithLogger(nil)},
		"nil observer":      {purge.WithObserver(nil)},
		"nil option":        {nil},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := purge.New(p, opts...); !errors.Is(err, store.ErrInvalid) || !strings.HasPrefix(err.Error(), "purge: new: ") {
				t.Fatalf("New: %v, want a purge: new: error matching store.ErrInvalid", err)
			}
			if err := purge.Run(context.Background(), p, opts...); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Run: %v, want store.ErrInvalid", err)
			}
		})
	}
	if _, err := purge.New(nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("New(nil): %v", err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("bad options still purged %d times", n)
	}
}

type purgerFunc func(context.Context) (int64, error)

func (f purgerFunc) Purge(ctx context.Context) (int64, error) { return f(ctx) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
