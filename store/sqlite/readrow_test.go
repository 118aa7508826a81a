package sqlite

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// The reads take no locked_until column: scanRecord derives LockedUntil
// from the status and expires_at. That holds because every statement that
// writes a row (the claim in both orders, a renewal, a takeover, Complete,
// a retried Complete) leaves locked_until equal to expires_at in progress
// and 0 once completed. TestLockedUntilDerived checks the column after
// each of them, and that Claim and Get report what the column says.
func TestLockedUntilDerived(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := newTestStore(t, WithClock(clock))
	ctx := t.Context()
	holder, other := store.NewToken(), store.NewToken()

	check := func(what, key string, rec store.Record) {
		t.Helper()
		var status, until, expires int64
		require.NoError(t, s.DB().QueryRowContext(ctx,
			`SELECT status, locked_until, expires_at FROM `+quoteIdent(DefaultTable)+` WHERE key = ?1`, key).Scan(&status, &until, &expires), what)
		switch status {
		case statusInProgress:
			require.Equal(t, expires, until, "%s: in progress, locked_until is expires_at", what)
		case statusCompleted:
			require.Zero(t, until, "%s: completed, locked_until is 0", what)
		default:
			t.Fatalf("%s: status %d", what, status)
		}
		require.Equal(t, fromMicros(until), rec.LockedUntil, "%s: LockedUntil is the column", what)
		require.Equal(t, fromMicros(expires), rec.ExpiresAt, "%s: ExpiresAt is the column", what)
		if got, err := s.Get(ctx, key); err == nil {
			require.Equal(t, rec, got, "%s: Get reads what the claim reported", what)
		}
	}
	claim := func(what, key string, tok store.Token, lease time.Duration, hint int32, want store.Outcome) store.Record {
		t.Helper()
		s.claimHint.Store(hint)
		c, err := s.Claim(ctx, key, "fp", tok, lease)
		require.NoError(t, err, what)
		require.Equal(t, want, c.Outcome, what)
		check(what, key, c.Record)
		return c.Record
	}
	for _, hint := range []int32{claimHintMax, -claimHintMax} {
		key := "k-" + map[bool]string{true: "write-first", false: "read-first"}[hint > 0]
		claim("new key", key, holder, time.Minute, hint, store.Acquired)
		claim("another token", key, other, time.Minute, hint, store.InProgress)
		advance(time.Second)
		claim("re-entrant", key, holder, 2*time.Minute, hint, store.Acquired)
		require.NoError(t, s.Renew(ctx, key, holder, 3*time.Minute))
		claim("after Renew", key, other, time.Minute, hint, store.InProgress)
		advance(4 * time.Minute)
		claim("takeover", key, other, time.Minute, hint, store.Acquired)
		require.NoError(t, s.Complete(ctx, key, other, []byte("resp"), time.Hour))
		claim("completed", key, holder, time.Minute, hint, store.Completed)
		require.NoError(t, s.Complete(ctx, key, other, []byte("again"), time.Hour))
		rec := claim("retried Complete", key, holder, time.Minute, hint, store.Completed)
		require.Equal(t, []byte("resp"), rec.Response)
		advance(2 * time.Hour)
		claim("after retention", key, holder, time.Minute, hint, store.Acquired)
	}
}

// The pooled row hands each read's strings and response to its record
// alone: records read one after another, on one goroutine or many, keep
// their own values, and a caller changing its response changes no other.
func TestReadRowPoolKeepsRecordsApart(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	keys := []string{"a", "bb", "ccc", "empty", "nil"}
	resps := map[string][]byte{"a": []byte("response a"), "bb": []byte("bb"), "ccc": []byte("a longer response for ccc"), "empty": {}, "nil": nil}
	for _, k := range keys {
		tok := store.Token("tok-" + k)
		_, err := s.Claim(ctx, k, "fp-"+k, tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, k, tok, resps[k], time.Hour))
	}
	_, err := s.Claim(ctx, "held", "fp-held", "tok-held", time.Minute)
	require.NoError(t, err)
	read := func(k string) store.Record {
		r, err := s.Get(ctx, k)
		require.NoError(t, err)
		return r
	}
	var got []store.Record
	for range 3 {
		for _, k := range keys {
			got = append(got, read(k))
		}
		held := read("held")
		require.Nil(t, held.Response, "in progress: no response")
		got = append(got, held)
	}
	for _, r := range got {
		if r.Key == "held" {
			continue
		}
		r.Response = append(r.Response[:0], "XXXXXXXX"...) // writes over the record's own response
	}
	for range 3 {
		for _, k := range keys {
			r := read(k)
			require.Equal(t, "fp-"+k, r.Fingerprint)
			require.Equal(t, store.Token("tok-"+k), r.Token)
			require.Equal(t, string(resps[k]), string(r.Response), k)
			require.NotNil(t, r.Response, "%s: a completed record's response is never nil", k)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := keys[(g+i)%len(keys)]
				r, err := s.runner(context.Background()).get(ctx, k)
				if err != nil || r.Fingerprint != "fp-"+k || string(r.Response) != string(resps[k]) || r.Token != store.Token("tok-"+k) {
					t.Errorf("concurrent read of %s: %+v, %v", k, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
