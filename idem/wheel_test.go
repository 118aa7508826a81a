package idem

import (
	"testing"
	"time"
)

// The wheel keeps its heartbeats in the order they come due, whatever the
// order they were added in, and arms its timer for the earliest.
func TestWheelOrder(t *testing.T) {
	var w wheel
	base := time.Now().Add(time.Hour)
	hbs := make([]*heartbeat, 5)
	for i := range hbs {
		hbs[i] = &heartbeat{}
	}
	// Due at +3, +1, +4, +0, +2 minutes.
	for i, m := range []int{3, 1, 4, 0, 2} {
		w.add(hbs[i], base.Add(time.Duration(m)*time.Minute))
	}
	defer w.timer.Stop()
	order := func() (got []int) {
		for hb := w.head; hb != nil; hb = hb.next {
			got = append(got, int(hb.due.Sub(base)/time.Minute))
			if hb.next != nil && hb.next.prev != hb {
				t.Fatal("broken back link")
			}
		}
		return got
	}
	if got := order(); len(got) != 5 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 3 || got[4] != 4 {
		t.Fatalf("order %v, want [0 1 2 3 4]", got)
	}
	if !w.armed.Equal(base) {
		t.Fatalf("armed for %v, want the earliest (%v)", w.armed, base)
	}
	if !w.remove(hbs[3]) || !w.remove(hbs[2]) || w.remove(hbs[2]) {
		t.Fatal("remove: a queued heartbeat not found, or found twice")
	}
	if got := order(); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 || w.tail != hbs[0] {
		t.Fatalf("order after removals %v, want [1 2 3]", got)
	}
}

// A heartbeat that comes due is taken out of the wheel and its loop
// started (which ends at once here: it was stopped).
func TestWheelFires(t *testing.T) {
	var w wheel
	hb := &heartbeat{stopped: true}
	w.add(hb, time.Now())
	for {
		w.mu.Lock()
		queued := hb.queued
		w.mu.Unlock()
		if !queued {
			break
		}
		time.Sleep(time.Millisecond) // the timer is the subject
	}
	if w.remove(hb) {
		t.Fatal("a fired heartbeat is still queued")
	}
}

// Heartbeats due at the same instant keep the order they were added in,
// whichever end the insertion starts from.
func TestWheelOrderStable(t *testing.T) {
	var w wheel
	base := time.Now().Add(time.Hour)
	a, b, c, d := &heartbeat{}, &heartbeat{}, &heartbeat{}, &heartbeat{}
	w.add(a, base)
	w.add(b, base.Add(10*time.Minute))
	defer w.timer.Stop()
	w.add(c, base)                     // nearer the head
	w.add(d, base.Add(10*time.Minute)) // nearer the tail
	var got []*heartbeat
	for hb := w.head; hb != nil; hb = hb.next {
		got = append(got, hb)
	}
	if len(got) != 4 || got[0] != a || got[1] != c || got[2] != b || got[3] != d || w.tail != d {
		t.Fatal("equal due times out of insertion order")
	}
}
