package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
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

// The read folds status and attempt into one column (readColumns): every
// attempt a row can hold comes back as it is, with its status, and a
// status other than 1 and 2 is an error, whatever attempt it is folded
// with: none passes for a valid one (6 is 2 | 1<<2, the state of a
// completed attempt 1; 5 that of an attempt 1 in progress).
func TestReadFoldsStatusAndAttempt(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	future := time.Now().Add(time.Hour).UnixMicro()
	insert := func(key string, status, attempt int64) {
		t.Helper()
		resp := any(nil)
		if status == statusCompleted {
			resp = []byte("r")
		}
		_, err := s.DB().ExecContext(ctx, `INSERT INTO `+quoteIdent(DefaultTable)+` (key, fingerprint, token, status, response, locked_until, expires_at, attempt, fence)
VALUES (?1, 'fp', 'tok', ?2, ?3, CASE ?2 WHEN 2 THEN 0 ELSE ?4 END, ?4, ?5, 9)`, key, status, resp, future, attempt)
		require.NoError(t, err)
	}
	for _, attempt := range []int64{0, 1, 2, 3, 4, 1<<31 - 1, 1 << 31, 1<<32 - 1} {
		for _, status := range []int64{statusInProgress, statusCompleted} {
			key := "k-" + strconv.FormatInt(status, 10) + "-" + strconv.FormatInt(attempt, 10)
			insert(key, status, attempt)
			r, err := s.Get(ctx, key)
			require.NoError(t, err, key)
			require.Equal(t, uint32(attempt), r.Attempt, key)
			require.Equal(t, uint64(9), r.Fence, key)
			want := map[int64]store.Status{statusInProgress: store.StatusInProgress, statusCompleted: store.StatusCompleted}[status]
			require.Equal(t, want, r.Status, key)
			c, err := s.Claim(ctx, key, "fp", "other", time.Minute)
			require.NoError(t, err, key)
			require.Equal(t, r, c.Record, key)
		}
	}
	for _, status := range []int64{0, 3, 4, 5, 6, -1, -2, 1 << 40} {
		for _, attempt := range []int64{0, 1, 7} {
			key := "bad-" + strconv.FormatInt(status, 10) + "-" + strconv.FormatInt(attempt, 10)
			insert(key, status, attempt)
			_, err := s.Get(ctx, key)
			require.ErrorContains(t, err, "unknown status", key)
			_, err = s.Claim(ctx, key, "fp", "other", time.Minute)
			require.ErrorContains(t, err, "unknown status", key)
		}
	}
}

// A pool opened with _texttotime parses a TEXT value without a declared
// type as a time when it can: the read keeps fingerprint and token as
// columns (declared TEXT), so one that looks like a time comes back as it
// is; and the integer columns read through expressions stay integers with
// _inttotime.
func TestReadOnTimeParsingPool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_texttotime=1&_inttotime=1&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := New(db)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	require.NoError(t, s.Migrate(ctx))
	for _, fp := range []string{"2026-01-02 03:04:05", "2026-01-02T03:04:05Z", "2026-01-02"} {
		tok := store.Token("2026-01-02 03:04:05.123456789+00:00")
		c, err := s.Claim(ctx, "k-"+fp, fp, tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, "k-"+fp, tok, []byte("2026-01-02"), time.Hour))
		c, err = s.Claim(ctx, "k-"+fp, fp, "other", time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, c.Outcome, fp)
		require.Equal(t, fp, c.Record.Fingerprint)
		require.Equal(t, tok, c.Record.Token)
		require.Equal(t, []byte("2026-01-02"), c.Record.Response)
		require.Equal(t, uint32(1), c.Record.Attempt)
	}
}
