package otelidem

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestFlightOldestMatchesBruteForce: after any mix of adds and removes, in
// any order of times, oldest is the earliest time still held.
func TestFlightOldestMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f flight
	t0 := time.Unix(1_700_000_000, 0)
	held := map[*flightEntry]time.Time{}
	for step := range 5000 {
		if len(held) == 0 || rng.IntN(3) > 0 {
			at := t0.Add(time.Duration(rng.IntN(1_000_000)) * time.Millisecond)
			e := new(flightEntry)
			f.add(e, at)
			held[e] = at
		} else {
			for e := range held { // map order: a random held entry
				f.remove(e)
				f.remove(e) // twice: nothing more
				delete(held, e)
				break
			}
		}
		var want time.Time
		for _, at := range held {
			if want.IsZero() || at.Before(want) {
				want = at
			}
		}
		got, ok := f.oldest()
		if ok != (len(held) > 0) || (ok && !got.Equal(want)) {
			t.Fatalf("step %d: oldest = %v, %v; want %v (%d held)", step, got, ok, want, len(held))
		}
		if n := f.len(); n != len(held) {
			t.Fatalf("step %d: len = %d, want %d", step, n, len(held))
		}
	}
	for e := range held {
		f.remove(e)
	}
	if _, ok := f.oldest(); ok || f.len() != 0 {
		t.Fatalf("not empty after removing everything")
	}
	f.remove(new(flightEntry)) // never added
}
