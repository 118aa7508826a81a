package memory

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// claimPaths is every state a Claim can find under its key, each with the
// claims that reach a different branch of Store.Claim (its fast path for a
// live record of the claim's fingerprint, and shard.claim for the rest),
// and the outcome the contract (docs/DESIGN.md, store.Classify) gives.
var claimPaths = []struct {
	name  string
	state *entry // nil: no record
	fp    string
	token store.Token
	want  store.Outcome
}{
	{"absent", nil, "fp", "t2", store.Acquired},
	{"completed/same fp", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fp", "t2", store.Completed},
	{"completed/same fp, completing token", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fp", "t1", store.Completed},
	{"completed/empty response", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted, response: []byte{}}, "fp", "t2", store.Completed},
	{"completed/nil response", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted}, "fp", "t2", store.Completed},
	{"completed/other fp", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fp2", "t2", store.Mismatch},
	{"completed/other fp, completing token", &entry{fingerprint: "fp", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fp2", "t1", store.Mismatch},
	{"completed/empty fp against fp", &entry{fingerprint: "", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fp", "t2", store.Mismatch},
	{"in progress/other token", &entry{fingerprint: "fp", token: "t1", status: store.StatusInProgress}, "fp", "t2", store.InProgress},
	// Mismatch is checked before in progress, for another token and for the holder.
	{"in progress/other token, other fp", &entry{fingerprint: "fp", token: "t1", status: store.StatusInProgress}, "fp2", "t2", store.Mismatch},
	{"in progress/holder, other fp", &entry{fingerprint: "fp", token: "t1", status: store.StatusInProgress}, "fp2", "t1", store.Mismatch},
	{"in progress/holder", &entry{fingerprint: "fp", token: "t1", status: store.StatusInProgress, attempt: 2, fence: 7}, "fp", "t1", store.Acquired},
	// A fingerprint that shares a prefix or a length with the stored one.
	{"in progress/other token, longer fp", &entry{fingerprint: "fp", token: "t1", status: store.StatusInProgress}, "fpx", "t2", store.Mismatch},
	{"completed/same length fp", &entry{fingerprint: "fa", token: "t1", status: store.StatusCompleted, response: []byte("done")}, "fb", "t2", store.Mismatch},
}

// Store.Claim decides each path as the contract says, returns the record
// as it stands after the call (for a claim that changes nothing: the stored
// record, as entry.record builds it), and writes only when it acquires; a
// live record, a lapsed lease and an expired completed record each.
func TestClaimFingerprintPaths(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range claimPaths {
		for _, lapsed := range []bool{false, true} {
			if lapsed && tc.state == nil {
				continue
			}
			name := tc.name
			if lapsed {
				name += "/lapsed"
			}
			t.Run(name, func(t *testing.T) {
				now := time.Unix(0, base.UnixNano()) // in time.Local, as the store builds its times
				s := mustNew(t, WithClock(func() time.Time { return now }), WithSweepInterval(0))
				const key = "k"
				h, _ := keyOK(key)
				sh := s.shard(h)
				var (
					prev   store.Record
					seeded entry
				)
				if tc.state != nil {
					e := *tc.state
					e.expiresAt = now.Add(time.Minute).UnixNano()
					if lapsed {
						e.expiresAt = now.Add(-time.Nanosecond).UnixNano()
					}
					if e.attempt == 0 {
						e.attempt, e.fence = 1, 3
					}
					sh.m[key] = e
					seeded, prev = e, e.record(key)
				}
				want := tc.want
				if lapsed {
					want = store.Acquired // absent, whatever it held
				}
				// The oracle agrees with the table: the table is the contract.
				if tc.state != nil {
					if f := store.Classify(prev, tc.fp, tc.token, now); f.Outcome != want {
						t.Fatalf("store.Classify says %v, the table %v", f.Outcome, want)
					}
				}
				c, err := s.Claim(ctx, key, tc.fp, tc.token, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if c.Outcome != want {
					t.Fatalf("Claim = %v, want %v", c.Outcome, want)
				}
				stored := sh.m[key]
				if want != store.Acquired {
					// Nothing written: the record returned is the stored one.
					if !entryEqual(stored, seeded) {
						t.Errorf("Claim changed the entry: %+v", stored)
					}
					if !reflect.DeepEqual(c.Record, prev) {
						t.Errorf("Claim record\n %+v\nwant the stored record\n %+v", c.Record, prev)
					}
					if len(stored.response) > 0 && &c.Record.Response[0] == &stored.response[0] {
						t.Errorf("the returned response aliases the stored one")
					}
					return
				}
				// Acquired: held by the caller for the claim's fingerprint,
				// with the lease from now, Attempt and Fence as Successor says.
				attempt, fence := store.Successor(prev, tc.state != nil, tc.token, now)
				until := now.Add(time.Hour)
				wantRec := store.Record{Key: key, Fingerprint: tc.fp, Status: store.StatusInProgress, Token: tc.token,
					LockedUntil: until, ExpiresAt: until, Attempt: attempt, Fence: fence}
				if !reflect.DeepEqual(c.Record, wantRec) {
					t.Errorf("Claim record\n %+v\nwant\n %+v", c.Record, wantRec)
				}
				if got := stored.record(key); !reflect.DeepEqual(got, wantRec) {
					t.Errorf("stored record\n %+v\nwant\n %+v", got, wantRec)
				}
			})
		}
	}
}

// entryEqual compares two entries field by field (entry holds a slice).
func entryEqual(a, b entry) bool {
	return a.fingerprint == b.fingerprint && a.token == b.token && string(a.response) == string(b.response) &&
		(a.response == nil) == (b.response == nil) && a.expiresAt == b.expiresAt && a.fence == b.fence &&
		a.attempt == b.attempt && a.status == b.status
}

func mustNew(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	s, err := New(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// The records Claim's fast path builds in place (a replay, another token's
// live lease) are the ones entry.completed and entry.inProgress build, for
// every field of an entry, so the literals cannot drift from the canonical
// builders: each field set to a distinct value in turn.
func TestClaimRecordLiterals(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	base := entry{fingerprint: "fp", token: "holder", expiresAt: now.Add(time.Minute).UnixNano(), attempt: 3, fence: 41}
	variants := []func(e *entry){
		func(e *entry) {},
		func(e *entry) { e.attempt = 1<<32 - 1 },
		func(e *entry) { e.fence = 1<<64 - 1 },
		func(e *entry) { e.expiresAt = now.Add(365 * 24 * time.Hour).UnixNano() },
		func(e *entry) { e.expiresAt = now.UnixNano() + 1 },
		func(e *entry) { e.token = "other-holder-" + store.NewToken() },
		func(e *entry) { e.fingerprint = "" },
		func(e *entry) { e.fingerprint = "a longer fingerprint, 0123456789abcdef" },
	}
	for _, status := range []store.Status{store.StatusCompleted, store.StatusInProgress} {
		for i, vary := range variants {
			for _, resp := range [][]byte{nil, {}, []byte("the response")} {
				if status == store.StatusInProgress && resp != nil {
					continue // an entry in progress has no response
				}
				e := base
				e.status, e.response = status, resp
				vary(&e)
				s := mustNew(t, WithClock(func() time.Time { return now }), WithSweepInterval(0))
				const key = "key"
				h, _ := keyOK(key)
				s.shard(h).m[key] = e
				c, err := s.Claim(ctx, key, e.fingerprint, "claimant", time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				want, wantOutcome := e.inProgress(key), store.InProgress
				if status == store.StatusCompleted {
					want, wantOutcome = e.completed(key), store.Completed
				}
				if c.Outcome != wantOutcome || !reflect.DeepEqual(c.Record, want) {
					t.Errorf("%v, variant %d, response %q: Claim = %v\n %+v\nwant %v\n %+v", status, i, resp, c.Outcome, c.Record, wantOutcome, want)
				}
				if (c.Record.Response == nil) != (want.Response == nil) {
					t.Errorf("%v, variant %d: response nil %v, want nil %v", status, i, c.Record.Response == nil, want.Response == nil)
				}
			}
		}
	}
}

// cloneBytes copies: the copy equals its source byte for byte, shares no
// memory with it (writing all of the copy's capacity leaves the source as
// it was), and keeps nil nil and empty empty, as bytes.Clone does.
func TestCloneBytes(t *testing.T) {
	if got := cloneBytes(nil); got != nil {
		t.Errorf("cloneBytes(nil) = %#v, want nil", got)
	}
	if got := cloneBytes([]byte{}); got == nil || len(got) != 0 {
		t.Errorf("cloneBytes([]byte{}) = %#v, want empty, not nil", got)
	}
	for _, n := range []int{1, 7, 8, 22, 64, 1000, 1 << 16} {
		src := make([]byte, n, n+16) // room beyond len, which a copy must not share either
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		orig := string(src)
		c := cloneBytes(src)
		if string(c) != orig {
			t.Fatalf("cloneBytes of %d bytes differs from its source", n)
		}
		c = c[:cap(c)]
		for i := range c {
			c[i] = 0
		}
		if string(src) != orig || string(src[:n+16][n:]) != string(make([]byte, 16)) {
			t.Fatalf("writing the copy of %d bytes changed its source: they alias", n)
		}
	}
}

// Complete keeps its own copy of the response, and every replay and Get
// returns another: none of them aliases the caller's buffer, the stored
// response or each other.
func TestResponseCopies(t *testing.T) {
	ctx := context.Background()
	s := mustNew(t, WithSweepInterval(0))
	tok := store.NewToken()
	resp := []byte("the stored response")
	if _, err := s.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "k", tok, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	h, _ := keyOK("k")
	stored := s.shard(h).m["k"].response
	var seen [][]byte
	seen = append(seen, resp, stored)
	for i := range 3 {
		c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
		if err != nil || c.Outcome != store.Completed {
			t.Fatalf("replay %d: %v, %v", i, c.Outcome, err)
		}
		seen = append(seen, c.Record.Response)
		r, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, r.Response)
	}
	for i, a := range seen {
		if string(a) != "the stored response" {
			t.Fatalf("copy %d = %q", i, a)
		}
		for j, b := range seen[:i] {
			if &a[0] == &b[0] {
				t.Errorf("copies %d and %d share their memory", j, i)
			}
		}
	}
	for _, b := range seen[2:] {
		b[0] = 'X' // a caller's copy is its own to change
	}
	resp[1] = 'X'
	if c, _ := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute); string(c.Record.Response) != "the stored response" {
		t.Errorf("after callers changed their copies, a replay returns %q", c.Record.Response)
	}
}
