package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := newStore(t, memory.WithClock(clock.Now))
			return storetest.Subject{Store: s, Clock: clock}
		},
	})
}

func TestConformanceRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps on the real clock")
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			s := newStore(t)
			return storetest.Subject{Store: s}
		},
		ShortLease: 100 * time.Millisecond,
	})
}

// An invalid option fails at New with an error that matches store.ErrInvalid.
func TestNewRejects(t *testing.T) {
	for name, opt := range map[string]memory.Option{
		"nil clock":      memory.WithClock(nil),
		"negative sweep": memory.WithSweepInterval(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := memory.New(opt)
			if !errors.Is(err, store.ErrInvalid) || s != nil {
				t.Fatalf("New = %v, %v; want nil and an error matching store.ErrInvalid", s, err)
			}
			if !strings.HasPrefix(err.Error(), "memory: new: ") {
				t.Errorf("error %q does not start with the package", err)
			}
		})
	}
}

// Bad arguments get the store package's own error, word for word, behind
// the operation's name, and change nothing: the Store's fast checks only
// ever hand the store package the arguments they cannot vouch for.
func TestInvalidArgumentsErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tok := store.NewToken()
	long := strings.Repeat("k", store.MaxKeyLen+1)
	for _, key := range []string{"ok", "", "k\x00", "k\xff", long, "é-ok"} {
		for _, fp := range []string{"fp", "f\x00", "f\xc3", strings.Repeat("f", store.MaxFingerprintLen+1)} {
			for _, tk := range []store.Token{tok, "", "t\x00", "t\x80", store.Token(strings.Repeat("t", store.MaxTokenLen+1))} {
				for _, d := range []time.Duration{time.Minute, 0, -1} {
					_, err := s.Claim(ctx, key, fp, tk, d)
					wantErr(t, "claim", err, store.CheckClaim(key, fp, tk, d))
					err = s.Complete(ctx, key, tk, []byte("r"), d)
					wantErr(t, "complete", err, store.CheckComplete(key, tk, d))
				}
				wantErr(t, "release", s.Release(ctx, key, tk), store.CheckRelease(key, tk))
			}
		}
		_, err := s.Get(ctx, key)
		if want := store.CheckKey(key); want != nil {
			wantErr(t, "get", err, want)
		}
	}
	// Only "ok" and "é-ok" with valid arguments may have claimed anything.
	if n := s.Len(); n > 2 {
		t.Errorf("the store holds %d records after bad arguments, want at most 2", n)
	}
}

// wantErr checks that a call's error is "memory: <op>: " and the store
// package's check error when the check fails.
func wantErr(t *testing.T, op string, got, check error) {
	t.Helper()
	if check == nil {
		return
	}
	if want := "memory: " + op + ": " + check.Error(); got == nil || got.Error() != want || !errors.Is(got, store.ErrInvalid) {
		t.Fatalf("%s error = %v, want %q matching store.ErrInvalid", op, got, want)
	}
}
