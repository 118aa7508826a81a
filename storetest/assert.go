package storetest

import (
	"bytes"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The helpers below fail the subtest with a message that names the call and
// the rule it broke. Those that return a value stop the subtest on a backend
// error, since nothing after it would be meaningful.

func (e *env) claim(key, fp string, tok store.Token, lease time.Duration) store.Claim {
	e.Helper()
	c, err := e.s.Claim(e.ctx, key, fp, tok, lease)
	if err != nil {
		e.Fatalf("Claim(%s, %s, %s, %v): unexpected error: %v", qs(key), qs(fp), qs(string(tok)), lease, err)
	}
	return c
}

// claimWant claims and checks the outcome and the record's key, fingerprint
// and token holder.
func (e *env) claimWant(key, fp string, tok store.Token, lease time.Duration, want store.Outcome) store.Claim {
	e.Helper()
	c := e.claim(key, fp, tok, lease)
	if c.Outcome != want {
		e.Fatalf("Claim(%s, %s, %s): outcome = %v, want %v (record: %s)", qs(key), qs(fp), qs(string(tok)), c.Outcome, want, describe(c.Record))
	}
	if c.Record.Key != key {
		e.Errorf("Claim(%s): Record.Key = %s, want it byte for byte", qs(key), qs(c.Record.Key))
	}
	if want == store.Acquired {
		e.checkInProgress("Claim result", c.Record, fp, tok)
	}
	return c
}

func (e *env) complete(key string, tok store.Token, resp []byte, retention time.Duration) error {
	e.Helper()
	return e.s.Complete(e.ctx, key, tok, resp, retention)
}

func (e *env) mustComplete(key string, tok store.Token, resp []byte, retention time.Duration) {
	e.Helper()
	if err := e.complete(key, tok, resp, retention); err != nil {
		e.Fatalf("Complete(%s, %s) by the holder: %v", qs(key), qs(string(tok)), err)
	}
}

func (e *env) mustRelease(key string, tok store.Token) {
	e.Helper()
	if err := e.s.Release(e.ctx, key, tok); err != nil {
		e.Fatalf("Release(%s, %s): %v, want nil", qs(key), qs(string(tok)), err)
	}
}

// get returns the live record, failing if there is none.
func (e *env) get(key string) store.Record {
	e.Helper()
	r, err := e.s.Get(e.ctx, key)
	if err != nil {
		e.Fatalf("Get(%s): %v, want a live record", qs(key), err)
	}
	if r.Key != key {
		e.Errorf("Get(%s): Record.Key = %s, want it byte for byte", qs(key), qs(r.Key))
	}
	return r
}

// wantAbsent checks that Get reports ErrNotFound and nothing else.
func (e *env) wantAbsent(key, why string) {
	e.Helper()
	r, err := e.s.Get(e.ctx, key)
	switch {
	case err == nil:
		e.Fatalf("Get(%s) %s: found %s, want ErrNotFound", qs(key), why, describe(r))
	case !errors.Is(err, store.ErrNotFound):
		e.Fatalf("Get(%s) %s: error %v, want one matching store.ErrNotFound", qs(key), why, err)
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInvalid):
		e.Fatalf("Get(%s) %s: error %v matches another sentinel too", qs(key), why, err)
	}
}

// wantLeaseLost checks that err is ErrLeaseLost.
func (e *env) wantLeaseLost(err error, call string) {
	e.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		e.Fatalf("%s: error %v, want one matching store.ErrLeaseLost", call, err)
	}
}

// wantInProgress checks that the key's live record is in progress, held by tok.
func (e *env) wantInProgress(key, fp string, tok store.Token) store.Record {
	e.Helper()
	r := e.get(key)
	e.checkInProgress("Get("+qs(key)+")", r, fp, tok)
	return r
}

func (e *env) checkInProgress(what string, r store.Record, fp string, tok store.Token) {
	e.Helper()
	if r.Status != store.StatusInProgress || r.Token != tok || r.Fingerprint != fp {
		e.Fatalf("%s: %s, want in progress held by %s with fingerprint %s", what, describe(r), qs(string(tok)), qs(fp))
	}
	if len(r.Response) != 0 {
		e.Errorf("%s: in-progress record has a %d-byte response, want none", what, len(r.Response))
	}
	if d := r.LockedUntil.Sub(r.ExpiresAt); d > e.h.Jitter || d < -e.h.Jitter {
		e.Errorf("%s: in progress with LockedUntil %s != ExpiresAt %s", what, ts(r.LockedUntil), ts(r.ExpiresAt))
	}
}

// wantCompleted checks that the key's live record is completed by tok with resp.
func (e *env) wantCompleted(key, fp string, tok store.Token, resp []byte) store.Record {
	e.Helper()
	r := e.get(key)
	e.checkCompleted("Get("+qs(key)+")", r, fp, tok, resp)
	return r
}

func (e *env) checkCompleted(what string, r store.Record, fp string, tok store.Token, resp []byte) {
	e.Helper()
	if r.Status != store.StatusCompleted || r.Token != tok || r.Fingerprint != fp {
		e.Fatalf("%s: %s, want completed by %s with fingerprint %s", what, describe(r), qs(string(tok)), qs(fp))
	}
	if !bytes.Equal(r.Response, resp) {
		e.Errorf("%s: Response = %s, want %s", what, short(r.Response), short(resp))
	}
	if !r.LockedUntil.IsZero() {
		e.Errorf("%s: completed record has LockedUntil %s, want the zero time", what, ts(r.LockedUntil))
	}
}

// wantNear checks that got is within the harness's tolerance of want.
func (e *env) wantNear(what string, got, want time.Time) {
	e.Helper()
	if d := got.Sub(want); d > e.h.Tolerance || d < -e.h.Tolerance {
		e.Errorf("%s = %s, want %s ± %v (off by %v)", what, ts(got), ts(want), e.h.Tolerance, d)
	}
}

// wantSame checks that a deadline the store reported again did not move:
// got is within the harness's Jitter of want.
func (e *env) wantSame(what string, got, want time.Time) {
	e.Helper()
	if d := got.Sub(want); d > e.h.Jitter || d < -e.h.Jitter {
		e.Errorf("%s = %s, want it unchanged at %s ± %v (moved by %v)", what, ts(got), ts(want), e.h.Jitter, d)
	}
}

// wantMoved checks that a renewal moved a deadline later by at least
// what the gap between the calls allows, less jitter.
func (e *env) wantMoved(what string, got, was time.Time, gap time.Duration) {
	e.Helper()
	if d := got.Sub(was); d < gap-e.h.Jitter {
		e.Errorf("%s = %s, want it at least %v later than %s (it moved by %v): the lease was not renewed", what, ts(got), gap-e.h.Jitter, ts(was), d)
	}
}

func describe(r store.Record) string {
	if r.Status == 0 && r.Token == "" {
		return "an empty record"
	}
	return "{" + r.Status.String() + " token=" + qs(string(r.Token)) + " fingerprint=" + qs(r.Fingerprint) +
		" response=" + short(r.Response) + " lockedUntil=" + ts(r.LockedUntil) +
		" expiresAt=" + ts(r.ExpiresAt) + "}"
}

// short quotes b, cut to its first 40 bytes with its length when longer.
func short(b []byte) string { return qs(string(b)) }

// qs quotes s for a failure message, cut to its first 40 bytes with its
// length when longer, so a 1024-byte key or fingerprint stays readable.
func qs(s string) string {
	if len(s) > 40 {
		return quote(s[:40]) + "…(" + itoa(len(s)) + " bytes)"
	}
	return quote(s)
}

// ts formats t for a failure message: RFC 3339 with nanoseconds and
// without the monotonic clock reading that %v would append.
func ts(t time.Time) string {
	if t.IsZero() {
		return "the zero time"
	}
	return t.Format(time.RFC3339Nano)
}
