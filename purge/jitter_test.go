package purge

import (
	"testing"
	"time"
)

func TestJitteredBounds(t *testing.T) {
	d := 10 * time.Second
	cases := []struct {
		f, u float64
		want time.Duration
	}{
		{0, 0.3, d},
		{0.1, 0, 9 * time.Second},
		{0.1, 0.5, d},
		{0.5, 0, 5 * time.Second},
		{0.5, 0.75, 12500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := jittered(d, c.f, c.u); got != c.want {
			t.Errorf("jittered(%v, %v, %v) = %v, want %v", d, c.f, c.u, got, c.want)
		}
	}
}

func TestNextSpreadsWithinJitter(t *testing.T) {
	j, err := New(fakePurger{}, WithInterval(time.Second), WithJitter(0.2))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		w := j.next()
		if w < 800*time.Millisecond || w > 1200*time.Millisecond {
			t.Fatalf("wait %v outside [0.8s, 1.2s]", w)
		}
		lo, hi = min(lo, w), max(hi, w)
	}
	// 2000 uniform draws cover most of the 400 ms range.
	if hi-lo < 300*time.Millisecond {
		t.Fatalf("waits span only %v..%v: not jittered", lo, hi)
	}
	exact, err := New(fakePurger{}, WithInterval(time.Second), WithJitter(0))
	if err != nil {
		t.Fatal(err)
	}
	if w := exact.next(); w != time.Second {
		t.Fatalf("jitter 0: wait %v, want 1s", w)
	}
}
