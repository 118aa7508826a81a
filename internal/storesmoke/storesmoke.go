// Package storesmoke is a short check, for tests only, that a store.Store
// opened from a URL really stores: a claim, a complete, a replay, a
// duplicate in flight and a release, on fresh random keys.
package storesmoke

import (
	"bytes"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Run exercises s with keys unique to this call and fails t on any
// departure from the contract.
func Run(t testing.TB, s store.Store) {
	t.Helper()
	ctx := t.Context()
	key := "smoke-" + string(store.NewToken())
	first, second := store.NewToken(), store.NewToken()
	c, err := s.Claim(ctx, key, "fp", first, time.Minute)
	if err != nil || c.Outcome != store.Acquired {
		t.Fatalf("first Claim = %v, %v; want Acquired", c.Outcome, err)
	}
	if c, err := s.Claim(ctx, key, "fp", second, time.Minute); err != nil || c.Outcome != store.InProgress {
		t.Fatalf("duplicate Claim in flight = %v, %v; want InProgress", c.Outcome, err)
	}
	if c, err := s.Claim(ctx, key, "other", second, time.Minute); err != nil || c.Outcome != store.Mismatch {
		t.Fatalf("Claim with another fingerprint = %v, %v; want Mismatch", c.Outcome, err)
	}
	if err := s.Complete(ctx, key, first, []byte("resp"), time.Minute); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	c, err = s.Claim(ctx, key, "fp", second, time.Minute)
	if err != nil || c.Outcome != store.Completed || !bytes.Equal(c.Record.Response, []byte("resp")) {
		t.Fatalf("replay Claim = %v %q, %v; want Completed %q", c.Outcome, c.Record.Response, err, "resp")
	}
	rel := key + "-released"
	if _, err := s.Claim(ctx, rel, "", first, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, rel, first); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, rel, "", second, time.Minute); err != nil || c.Outcome != store.Acquired {
		t.Fatalf("Claim after Release = %v, %v; want Acquired", c.Outcome, err)
	}
	if err := s.Release(ctx, rel, second); err != nil {
		t.Fatal(err)
	}
}
