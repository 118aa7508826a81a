package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// inspectorCases check store.Inspector: the state of every record, the
// filters, the order and the cursors, Count and Lookup.
var inspectorCases = []testCase{
	{"States", func(e *env) {
		in := e.inspector()
		e.fourStates()
		for key, st := range map[string]store.State{"in-progress": store.StateInProgress, "completed": store.StateCompleted, "lapsed": store.StateLapsed, "expired": store.StateExpired} {
			got := e.listKeys(in, store.ListOptions{State: st}, 0)
			if st.Free() && !e.kept(in, key) {
				if len(got) != 0 {
					e.Errorf("List(State %v) = %q; want nothing: Lookup does not find %q, so the store does not keep %v records", st, got, key, st)
				}
				continue
			}
			if !slices.Equal(got, []string{key}) {
				e.Errorf("List(State %v) = %q, want [%q]", st, got, key)
			}
		}
		all := e.listKeys(in, store.ListOptions{}, 0)
		for _, k := range []string{"in-progress", "completed"} {
			if !slices.Contains(all, k) {
				e.Errorf("List with no state = %q: %q missing", all, k)
			}
		}
	}},
	{"Lookup", func(e *env) {
		in := e.inspector()
		tok := e.fourStates()
		for key, st := range map[string]store.State{"in-progress": store.StateInProgress, "completed": store.StateCompleted, "lapsed": store.StateLapsed, "expired": store.StateExpired} {
			got, err := in.Lookup(e.ctx, key)
			if st.Free() && errors.Is(err, store.ErrNotFound) {
				continue // a store that does not keep what is free
			}
			if err != nil {
				e.Errorf("Lookup(%q): %v", key, err)
				continue
			}
			if got.Key != key || got.State != st || got.TokenHash != store.HashToken(tok[key]) || got.FingerprintSize != len("fp") {
				e.Errorf("Lookup(%q) = %+v; want key %q, state %v, TokenHash %s, FingerprintSize 2", key, got, key, st, store.HashToken(tok[key]))
			}
			if strings.Contains(fmt.Sprintf("%+v", got), string(tok[key])) {
				e.Errorf("Lookup(%q) = %+v shows the token %q in clear", key, got, tok[key])
			}
			wantResp := 0
			if st == store.StateCompleted || st == store.StateExpired {
				wantResp = len("response")
			}
			if got.ResponseSize != wantResp {
				e.Errorf("Lookup(%q).ResponseSize = %d, want %d", key, got.ResponseSize, wantResp)
			}
			if locked := !got.LockedUntil.IsZero(); locked != (st == store.StateInProgress || st == store.StateLapsed) {
				e.Errorf("Lookup(%q).LockedUntil = %v for a %v record", key, got.LockedUntil, st)
			}
		}
		if _, err := in.Lookup(e.ctx, "never-claimed"); !errors.Is(err, store.ErrNotFound) {
			e.Errorf("Lookup of a key never claimed: %v, want an error matching store.ErrNotFound", err)
		}
		if _, err := in.Lookup(e.ctx, ""); !errors.Is(err, store.ErrInvalid) {
			e.Errorf("Lookup of an empty key: %v, want an error matching store.ErrInvalid", err)
		}
	}},
	{"Pages", func(e *env) {
		// 23 keys, claimed in random order, with deadlines a second apart
		// three at a time (equal deadlines on a manual clock: the key
		// breaks the tie). Every page size must visit each once, in the
		// order of the deadlines Get reports, then of the keys.
		in := e.inspector()
		const n = 23
		for _, i := range rand.Perm(n) {
			e.claimWant(fmt.Sprintf("k%02d", i), "fp", store.NewToken(), long+time.Duration(i/3)*time.Second, store.Acquired)
		}
		var pos []store.Position
		for i := range n {
			k := fmt.Sprintf("k%02d", i)
			pos = append(pos, store.Position{ExpiresAt: e.get(k).ExpiresAt, Key: k})
		}
		slices.SortFunc(pos, func(a, b store.Position) int {
			if a.Before(b) {
				return -1
			}
			return 1
		})
		var want []string
		for _, p := range pos {
			want = append(want, p.Key)
		}
		for _, limit := range []int{1, 2, 3, 7, n, n + 1, 0} {
			if got := e.listKeys(in, store.ListOptions{State: store.StateInProgress, Limit: limit}, n+2); !slices.Equal(got, want) {
				e.Errorf("List by pages of %d = %q, want %q (each key once, oldest deadline first, then by key)", limit, got, want)
			}
		}
	}},
	{"Filters", func(e *env) {
		in := e.inspector()
		for i, k := range []string{"a/1", "a/2", "ab", "b/1", "A/1"} {
			e.claimWant(k, "fp", store.NewToken(), long+time.Duration(i)*time.Minute, store.Acquired)
		}
		if got := e.listKeys(in, store.ListOptions{Prefix: "a/"}, 0); !slices.Equal(got, []string{"a/1", "a/2"}) {
			e.Errorf("List(Prefix a/) = %q, want [a/1 a/2] (byte for byte)", got)
		}
		before := e.now().Add(long + 90*time.Second)
		if got := e.listKeys(in, store.ListOptions{ExpiresBefore: before}, 0); !slices.Equal(got, []string{"a/1", "a/2"}) {
			e.Errorf("List(ExpiresBefore now+long+90s) = %q, want [a/1 a/2]", got)
		}
		if got := e.listKeys(in, store.ListOptions{State: store.StateCompleted}, 0); len(got) != 0 {
			e.Errorf("List(State completed) = %q with nothing completed", got)
		}
	}},
	{"Count", func(e *env) {
		in := e.inspector()
		e.fourStates()
		e.claimWant("second", "fp", store.NewToken(), long+time.Hour, store.Acquired)
		c, err := in.Count(e.ctx)
		if err != nil {
			e.Fatalf("Count: %v", err)
		}
		want := store.Counts{InProgress: 2, Completed: 1}
		if e.kept(in, "lapsed") {
			want.Lapsed = 1
		}
		if e.kept(in, "expired") {
			want.Expired = 1
		}
		first, err := in.Lookup(e.ctx, "in-progress")
		if err != nil {
			e.Fatalf("Lookup: %v", err)
		}
		want.OldestLease = c.OldestLease
		if c != want {
			e.Errorf("Count = %+v, want %+v", c, want)
		}
		if !c.OldestLease.Equal(first.LockedUntil) {
			e.Errorf("Count.OldestLease = %v, want %v (the earlier of two leases)", c.OldestLease, first.LockedUntil)
		}
	}},
	{"InvalidOptions", func(e *env) {
		in := e.inspector()
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
		for _, o := range []store.ListOptions{{Limit: -1}, {Limit: store.MaxListLimit + 1}, {Cursor: "not a cursor!"}, {State: store.StateExpired + 1}} {
			if _, err := in.List(e.ctx, o); !errors.Is(err, store.ErrInvalid) {
				e.Errorf("List(%+v): %v, want an error matching store.ErrInvalid", o, err)
			}
		}
	}},
}

// fourStates makes one record in each state, under its state's name, and
// returns their tokens.
func (e *env) fourStates() map[string]store.Token {
	e.Helper()
	tok := map[string]store.Token{"in-progress": store.NewToken(), "completed": store.NewToken(), "lapsed": store.NewToken(), "expired": store.NewToken()}
	e.claimWant("lapsed", "fp", tok["lapsed"], e.short(), store.Acquired)
	e.claimWant("expired", "fp", tok["expired"], long, store.Acquired)
	e.mustComplete("expired", tok["expired"], []byte("response"), e.short())
	e.lapse(e.short())
	e.claimWant("in-progress", "fp", tok["in-progress"], long, store.Acquired)
	e.claimWant("completed", "fp", tok["completed"], long, store.Acquired)
	e.mustComplete("completed", tok["completed"], []byte("response"), long)
	return tok
}

// kept reports whether the store still holds the free record under key.
func (e *env) kept(in store.Inspector, key string) bool {
	e.Helper()
	_, err := in.Lookup(e.ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.Fatalf("Lookup(%q): %v", key, err)
	}
	return err == nil
}

// listKeys follows List's cursors from the first page and returns the keys
// in the order listed, failing when the order breaks (a key listed twice
// included), when a page is larger than asked or an entry is not in the
// state asked for, or when more than maxPages pages come (0: 1000).
func (e *env) listKeys(in store.Inspector, o store.ListOptions, maxPages int) []string {
	e.Helper()
	if maxPages == 0 {
		maxPages = 1000
	}
	limit := o.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	var keys []string
	var last *store.Entry
	for range maxPages {
		p, err := in.List(e.ctx, o)
		if err != nil {
			e.Fatalf("List(%+v): %v", o, err)
		}
		if len(p.Entries) > limit {
			e.Errorf("List(%+v) returned %d entries, more than the limit", o, len(p.Entries))
		}
		for i := range p.Entries {
			x := p.Entries[i]
			if last != nil && !store.PositionOf(*last).Before(store.PositionOf(x)) {
				e.Errorf("List(%+v): %q (expires %v) listed after %q (expires %v): not oldest first, or listed twice", o, x.Key, x.ExpiresAt, last.Key, last.ExpiresAt)
			}
			if o.State != 0 && x.State != o.State {
				e.Errorf("List(State %v) listed %q in state %v", o.State, x.Key, x.State)
			}
			last = &x
			keys = append(keys, x.Key)
		}
		if p.Next == "" {
			return keys
		}
		if p.Next == o.Cursor {
			e.Fatalf("List(%+v) returned its own cursor as the next one", o)
		}
		o.Cursor = p.Next
	}
	e.Errorf("List(%+v) still had a next page after %d pages", o, maxPages)
	return keys
}

func (e *env) inspector() store.Inspector {
	e.Helper()
	in, ok := e.s.(store.Inspector)
	if !ok {
		e.Skip("store does not implement store.Inspector")
	}
	return in
}

// RunInspector runs only the suite's Inspector group (Run includes it): for
// a store that implements store.Inspector, the state of every record, the
// filters, the order and the cursors of List, Count and Lookup. Its cases
// skip for a store that does not implement it.
func RunInspector(t *testing.T, h Harness) {
	t.Helper()
	runGroups(t, h, []group{{"Inspector", inspectorCases}})
}
