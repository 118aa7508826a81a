package storetest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

var errorCases = []testCase{
	{"InvalidArguments", func(e *env) {
		held := store.NewToken()
		e.claimWant("held", "fp", held, long, store.Acquired)
		tooLongKey := strings.Repeat("k", e.h.MaxKeyLen+1)
		bad := []struct {
			name string
			key  string // the key the call would have written, checked afterwards
			call func() error
		}{
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
			{"Release empty key", "", func() error { return e.s.Release(e.ctx, "", held) }},
			{"Release empty token", "", func() error { return e.s.Release(e.ctx, "held", "") }},
			{"Get empty key", "", func() error { _, err := e.s.Get(e.ctx, ""); return err }},
			{"Get key too long", "", func() error { _, err := e.s.Get(e.ctx, tooLongKey); return err }},
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
		e.wantInProgress("held", "fp", held)
	}},
	{"CancelledContext", func(e *env) {
		held := store.NewToken()
		first := e.claimWant("held", "fp", held, long, store.Acquired)
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		calls := []struct {
			name string
			call func() error
		}{
			{"Claim", func() error { _, err := e.s.Claim(ctx, "k", "fp", store.NewToken(), long); return err }},
			{"Claim renewal", func() error { _, err := e.s.Claim(ctx, "held", "fp", held, 2*long); return err }},
			{"Complete", func() error { return e.s.Complete(ctx, "held", held, []byte("r"), long) }},
			{"Release", func() error { return e.s.Release(ctx, "held", held) }},
			{"Get", func() error { _, err := e.s.Get(ctx, "held"); return err }},
		}
		for _, c := range calls {
			err := c.call()
			if !errors.Is(err, context.Canceled) {
				e.Errorf("%s with a cancelled context: error %v, want one matching context.Canceled", c.name, err)
			}
			if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost) {
				e.Errorf("%s with a cancelled context: error %v matches a store sentinel", c.name, err)
			}
		}
		e.wantAbsent("k", "after a Claim with a cancelled context")
		r := e.wantInProgress("held", "fp", held)
		e.wantSame("LockedUntil after a renewal with a cancelled context", r.LockedUntil, first.Record.LockedUntil)
	}},
	{"ExpiredDeadline", func(e *env) {
		ctx, cancel := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
		defer cancel()
		if _, err := e.s.Claim(ctx, "k", "fp", store.NewToken(), long); !errors.Is(err, context.DeadlineExceeded) {
			e.Errorf("Claim with an expired deadline: error %v, want one matching context.DeadlineExceeded", err)
		}
		e.wantAbsent("k", "after a Claim with an expired deadline")
	}},
}
