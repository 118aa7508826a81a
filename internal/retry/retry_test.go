package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLoop(t *testing.T) {
	p := Default()
	p.MaxAttempts = 3
	var slept []time.Duration
	p.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }

	var lasts []bool
	n, err := p.Loop(t.Context(), true, func(n int, last bool) (time.Duration, bool) {
		lasts = append(lasts, last)
		return time.Duration(n+1) * time.Millisecond, true
	})
	if err != nil || n != 3 {
		t.Fatalf("Loop = %d, %v; want 3 attempts", n, err)
	}
	if want := []bool{false, false, true}; len(lasts) != 3 || lasts[0] != want[0] || lasts[1] != want[1] || lasts[2] != want[2] {
		t.Errorf("last flags %v, want %v", lasts, want)
	}
	if len(slept) != 2 || slept[0] != time.Millisecond || slept[1] != 2*time.Millisecond {
		t.Errorf("slept %v, want the waits attempt returned, between attempts only", slept)
	}

	n, _ = p.Loop(t.Context(), false, func(int, bool) (time.Duration, bool) { return 0, true })
	if n != 1 {
		t.Errorf("without retry: %d attempts, want 1", n)
	}
	n, _ = p.Loop(t.Context(), true, func(int, bool) (time.Duration, bool) { return 0, false })
	if n != 1 {
		t.Errorf("an attempt that needs no other: %d attempts, want 1", n)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("caller gave up")
	p.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(cause); return Sleep(ctx, time.Hour) }
	_, err = p.Loop(ctx, true, func(int, bool) (time.Duration, bool) { return time.Hour, true })
	if !errors.Is(err, cause) {
		t.Errorf("a wait cut short: %v, want the context's cause", err)
	}
}

func TestWaitAndBackoff(t *testing.T) {
	p := Policy{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxDelay: 2 * time.Second}
	for n := range 40 {
		d := p.Backoff(n)
		hi := min(p.MinBackoff<<min(n, 29), p.MaxBackoff)
		if d < hi/2 || d > hi {
			t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, d, hi/2, hi)
		}
	}
	if d, ok := p.Wait(0, true, time.Second); !ok || d < time.Second || d > time.Second+time.Second/10+time.Millisecond {
		t.Errorf("Wait with a delay = %v, %v", d, ok)
	}
	if _, ok := p.Wait(0, true, 3*time.Second); ok {
		t.Error("a delay above MaxDelay is waited for")
	}
	if d, ok := p.Wait(0, false, 0); !ok || d > p.MinBackoff {
		t.Errorf("Wait without a delay = %v, %v; want the backoff", d, ok)
	}
	for _, err := range []error{CheckAttempts("X", 0), CheckBackoff("X", 0, 1), CheckBackoff("X", 2, 1), CheckDelay("X", 0), CheckFunc("X", true, "y")} {
		if err == nil {
			t.Error("a bad value passes its check")
		}
	}
}
