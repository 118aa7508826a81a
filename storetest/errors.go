package storetest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// badCall is one call with an invalid argument: key is the key it would
// have written, checked afterwards to be absent ("" when it names none).
type badCall struct {
	name string
	key  string
	call func() error
}

var errorCases = []testCase{
	{"InvalidArguments", func(e *env) {
		held := store.NewToken()
		first := e.claimWant("held", "fp", held, long, store.Acquired)
		tooLongKey := strings.Repeat("k", e.h.MaxKeyLen+1)
		bad := []badCall{
			{"Claim empty key", "", func() error { _, err := e.s.Claim(e.ctx, "", "fp", held, long); return err }},
			{"Claim empty token", "k1", func() error { _, err := e.s.Claim(e.ctx, "k1", "fp", "", long); return err }},
			{"Claim zero lease", "k2", func() error { _, err := e.s.Claim(e.ctx, "k2", "fp", held, 0); return err }},
			{"Claim negative lease", "k3", func() error { _, err := e.s.Claim(e.ctx, "k3", "fp", held, -time.Second); return err }},
			{"Claim key too long", "", func() error { _, err := e.s.Claim(e.ctx, tooLongKey, "fp", held, long); return err }},
			{"Claim key with NUL", "", func() error { _, err := e.s.Claim(e.ctx, "k4\x00", "fp", held, long); return err }},
			{"Claim key not UTF-8", "", func() error { _, err := e.s.Claim(e.ctx, "k5\xff", "fp", held, long); return err }},
			{"Claim fingerprint too long", "k6", func() error {
				_, err := e.s.Claim(e.ctx, "k6", strings.Repeat("f", e.h.MaxFingerprintLen+1), held, long)
				return err
			}},
			{"Claim token too long", "k7", func() error {
				_, err := e.s.Claim(e.ctx, "k7", "fp", store.Token(strings.Repeat("t", store.MaxTokenLen+1)), long)
				return err
			}},
			{"Complete empty key", "", func() error { return e.s.Complete(e.ctx, "", held, nil, long) }},
			{"Complete empty token", "", func() error { return e.s.Complete(e.ctx, "held", "", nil, long) }},
			{"Complete zero retention", "", func() error { return e.s.Complete(e.ctx, "held", held, []byte("r"), 0) }},
			{"Complete negative retention", "", func() error { return e.s.Complete(e.ctx, "held", held, []byte("r"), -time.Minute) }},
			{"Renew empty key", "", func() error { return e.s.Renew(e.ctx, "", held, long) }},
			{"Renew empty token", "", func() error { return e.s.Renew(e.ctx, "held", "", long) }},
			{"Renew zero lease", "", func() error { return e.s.Renew(e.ctx, "held", held, 0) }},
			{"Renew negative lease", "", func() error { return e.s.Renew(e.ctx, "held", held, -time.Second) }},
			{"Release empty key", "", func() error { return e.s.Release(e.ctx, "", held) }},
			{"Release empty token", "", func() error { return e.s.Release(e.ctx, "held", "") }},
			{"Get empty key", "", func() error { _, err := e.s.Get(e.ctx, ""); return err }},
			{"Get key too long", "", func() error { _, err := e.s.Get(e.ctx, tooLongKey); return err }},
			{"Get key with NUL", "", func() error { _, err := e.s.Get(e.ctx, "held\x00"); return err }},
			{"Get key not UTF-8", "", func() error { _, err := e.s.Get(e.ctx, "held\xff"); return err }},
		}
		// Fingerprints and tokens are text like keys: no NUL, valid UTF-8.
		for i, fp := range []string{"fp\x00", "fp\xff", "\xc3\x28"} {
			key := "fp-bad-" + itoa(i)
			bad = append(bad, badCall{"Claim fingerprint " + qs(fp), key, func() error { _, err := e.s.Claim(e.ctx, key, fp, held, long); return err }})
		}
		// Complete and Release check key and token as Claim does; the bad
		// key or token differs from "held" and its holder only by what
		// makes it invalid, so a store that skips the check could take one
		// for the other.
		for _, k := range []string{tooLongKey, "held\x00", "held\xff"} {
			bad = append(bad, badCall{"Complete key " + qs(k), "", func() error { return e.s.Complete(e.ctx, k, held, []byte("r"), long) }},
				badCall{"Release key " + qs(k), "", func() error { return e.s.Release(e.ctx, k, held) }},
				badCall{"Renew key " + qs(k), "", func() error { return e.s.Renew(e.ctx, k, held, long) }})
		}
		for i, tok := range []store.Token{held + "\x00", held + "\xff", store.Token(strings.Repeat("t", store.MaxTokenLen+1))} {
			key := "tok-bad-" + itoa(i)
			bad = append(bad, badCall{"Claim token " + qs(string(tok)), key, func() error { _, err := e.s.Claim(e.ctx, key, "fp", tok, long); return err }},
				badCall{"Complete token " + qs(string(tok)), "", func() error { return e.s.Complete(e.ctx, "held", tok, []byte("r"), long) }},
				badCall{"Release token " + qs(string(tok)), "", func() error { return e.s.Release(e.ctx, "held", tok) }},
				badCall{"Renew token " + qs(string(tok)), "", func() error { return e.s.Renew(e.ctx, "held", tok, long) }})
		}
		for _, b := range bad {
			err := b.call()
			if !errors.Is(err, store.ErrInvalid) {
				e.Errorf("%s: error %v, want one matching store.ErrInvalid", b.name, err)
			}
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost) {
				e.Errorf("%s: error %v matches another sentinel too", b.name, err)
			}
			if b.key != "" {
				e.wantAbsent(b.key, "after "+b.name+" was rejected")
			}
		}
		r := e.wantInProgress("held", "fp", held)
		e.wantSame("the holder's LockedUntil after the rejected calls (a Renew with a bad argument must not renew)", r.LockedUntil, first.Record.LockedUntil)
	}},
	{"CancelledContext", func(e *env) {
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		endedContext(e, ctx, context.Canceled, "a cancelled context")
	}},
	{"ExpiredDeadline", func(e *env) {
		ctx, cancel := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
		defer cancel()
		endedContext(e, ctx, context.DeadlineExceeded, "an expired deadline")
	}},
}

// endedContext calls each of the five methods with ctx, which has already
// ended with want, and checks that every call fails with an error matching
// want (and no store sentinel) and changes nothing.
func endedContext(e *env, ctx context.Context, want error, what string) {
	held := store.NewToken()
	first := e.claimWant("held", "fp", held, long, store.Acquired)
	calls := []struct {
		name string
		call func() error
	}{
		{"Claim", func() error { _, err := e.s.Claim(ctx, "k", "fp", store.NewToken(), long); return err }},
		{"Claim renewal", func() error { _, err := e.s.Claim(ctx, "held", "fp", held, 2*long); return err }},
		{"Complete", func() error { return e.s.Complete(ctx, "held", held, []byte("r"), long) }},
		{"Release", func() error { return e.s.Release(ctx, "held", held) }},
		{"Renew", func() error { return e.s.Renew(ctx, "held", held, 2*long) }},
		{"Get", func() error { _, err := e.s.Get(ctx, "held"); return err }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, want) {
			e.Errorf("%s with %s: error %v, want one matching %v", c.name, what, err, want)
		}
		if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost) {
			e.Errorf("%s with %s: error %v matches a store sentinel", c.name, what, err)
		}
	}
	e.wantAbsent("k", "after a Claim with "+what)
	r := e.wantInProgress("held", "fp", held)
	e.wantSame("LockedUntil after a renewal with "+what, r.LockedUntil, first.Record.LockedUntil)
}
