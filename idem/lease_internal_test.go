package idem

import (
	"strings"
	"testing"
	"time"
)

// monoNow reads the same time as time.Now, carries a monotonic reading (so
// Since, Until and After compare it on that clock), and never goes back.
func TestMonoNow(t *testing.T) {
	prev := monoNow()
	for range 1000 {
		before := time.Now()
		m := monoNow()
		after := time.Now()
		if m.Before(before) || m.After(after) {
			t.Fatalf("monoNow %v is not between %v and %v", m, before, after)
		}
		if m.Before(prev) {
			t.Fatalf("monoNow went back: %v after %v", m, prev)
		}
		prev = m
		if d := m.Round(0).Sub(before.Round(0)); d < -time.Second || d > time.Second {
			t.Fatalf("monoNow's wall reading is %v off the wall clock's", d)
		}
	}
	if !strings.Contains(prev.String(), " m=") {
		t.Fatalf("monoNow %v has no monotonic reading", prev)
	}
}
