package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

func TestStateNames(t *testing.T) {
	for st := store.StateInProgress; st <= store.StateExpired; st++ {
		got, err := store.ParseState(st.String())
		if err != nil || got != st {
			t.Errorf("ParseState(%q) = %v, %v", st.String(), got, err)
		}
	}
	if _, err := store.ParseState("stuck"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ParseState(stuck): %v", err)
	}
	if s := store.State(9).String(); s != "State(9)" {
		t.Errorf("State(9) = %q", s)
	}
	if store.StateOf(store.StatusInProgress, true) != store.StateLapsed || store.StateOf(store.StatusCompleted, true) != store.StateExpired ||
		store.StateOf(store.StatusInProgress, false) != store.StateInProgress || store.StateOf(store.StatusCompleted, false) != store.StateCompleted {
		t.Error("StateOf is wrong")
	}
}

// TestPageScan: entries offered in random order come out in List's order,
// a page at a time, each once, through cursors that round-trip.
func TestPageScan(t *testing.T) {
	base := time.Unix(1000, 0)
	var all []store.Entry
	for i := range 50 {
		all = append(all, store.Entry{Key: fmt.Sprintf("k%02d", i), State: store.StateInProgress, ExpiresAt: base.Add(time.Duration(i/4) * time.Nanosecond)})
	}
	for _, limit := range []int{1, 3, 7, 50, 51} {
		o := store.ListOptions{Limit: limit}
		var got []string
		for range 100 {
			scan, err := store.NewPageScan(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range rand.Perm(len(all)) {
				scan.Offer(all[i])
			}
			p := scan.Page()
			for _, e := range p.Entries {
				got = append(got, e.Key)
			}
			if p.Next == "" {
				break
			}
			o.Cursor = p.Next
		}
		if len(got) != len(all) {
			t.Fatalf("limit %d: %d keys, want %d", limit, len(got), len(all))
		}
		for i, k := range got {
			if k != all[i].Key {
				t.Fatalf("limit %d: key %d is %s, want %s", limit, i, k, all[i].Key)
			}
		}
	}
	for _, o := range []store.ListOptions{{Limit: -1}, {Limit: store.MaxListLimit + 1}, {Cursor: "%%"}, {Cursor: "AA"}, {State: 7}} {
		if _, err := store.NewPageScan(o); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("NewPageScan(%+v): %v, want ErrInvalid", o, err)
		}
	}
}

func TestHashToken(t *testing.T) {
	a, b := store.HashToken("a"), store.HashToken("b")
	if a == b || len(a) != 16 || a != store.HashToken("a") {
		t.Errorf("HashToken: %q %q", a, b)
	}
}
