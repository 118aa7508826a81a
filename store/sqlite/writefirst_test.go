package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// stmtLog records the statements a Store's callers run (onStmt).
type stmtLog struct {
	mu  sync.Mutex
	ids []stmtID
}

func logStmts(s *Store) *stmtLog {
	l := &stmtLog{}
	s.onStmt = func(id stmtID) {
		l.mu.Lock()
		l.ids = append(l.ids, id)
		l.mu.Unlock()
	}
	return l
}

// take returns the statements logged since the last take.
func (l *stmtLog) take() []stmtID {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.ids
	l.ids = nil
	return ids
}

// TestClaimOrderFollowsTheLoad: after a run of claims that acquire, a claim
// of a new key is one statement (the write, no SELECT); after a run of
// replays, a replay is one SELECT and no write. Either way every outcome is
// the contract's.
func TestClaimOrderFollowsTheLoad(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	log := logStmts(s)
	tok := store.NewToken()
	for i := range claimHintMax {
		c, err := s.Claim(ctx, fmt.Sprintf("k%d", i), "fp", tok, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		require.NoError(t, s.Complete(ctx, fmt.Sprintf("k%d", i), tok, []byte("r"), time.Hour))
	}
	log.take()
	c, err := s.Claim(ctx, "new", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	require.Equal(t, []stmtID{stmtInsert}, log.take(), "a new key after acquisitions: the INSERT alone")

	other := store.NewToken()
	for range 2 * claimHintMax {
		c, err := s.Claim(ctx, "k0", "fp", other, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, c.Outcome)
	}
	log.take()
	c, err = s.Claim(ctx, "k1", "fp", other, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	require.Equal(t, []byte("r"), c.Record.Response)
	require.Equal(t, []stmtID{stmtRead}, log.take(), "a replay after replays: one SELECT, no write")
}

// TestClaimWriteFirstOutcomes: with the Store leaning to write first, every
// kind of record a claim can meet gets the same outcome and record as when
// it reads first, in a plain call and in InTx.
func TestClaimWriteFirstOutcomes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := newTestStore(t, WithClock(clock))
	ctx := t.Context()
	log := logStmts(s)
	holder, other := store.NewToken(), store.NewToken()
	_, err := s.Claim(ctx, "done", "fp", holder, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "done", holder, []byte("resp"), time.Hour))
	_, err = s.Claim(ctx, "held", "fp", holder, time.Minute)
	require.NoError(t, err)
	_, err = s.Claim(ctx, "lapses", "fp", holder, time.Second)
	require.NoError(t, err)
	advance(2 * time.Second)

	cases := []struct {
		key, fp string
		tok     store.Token
		want    store.Outcome
		status  store.Status
		owner   store.Token
	}{
		{"done", "fp", other, store.Completed, store.StatusCompleted, holder},
		{"done", "fp2", other, store.Mismatch, store.StatusCompleted, holder},
		{"held", "fp", other, store.InProgress, store.StatusInProgress, holder},
		{"held", "fp2", other, store.Mismatch, store.StatusInProgress, holder},
		{"held", "fp", holder, store.Acquired, store.StatusInProgress, holder}, // renewal
		{"lapses", "fp", other, store.Acquired, store.StatusInProgress, other}, // takeover
		{"absent", "fp", other, store.Acquired, store.StatusInProgress, other},
	}
	for _, c := range cases {
		s.claimHint.Store(claimHintMax)
		log.take()
		got, err := s.Claim(ctx, c.key, c.fp, c.tok, time.Minute)
		require.NoError(t, err, c.key)
		require.Equal(t, c.want, got.Outcome, "%s %s", c.key, c.fp)
		require.Equal(t, c.status, got.Record.Status, c.key)
		require.Equal(t, c.owner, got.Record.Token, c.key)
		if c.want == store.Completed {
			require.Equal(t, []byte("resp"), got.Record.Response)
		}
		switch c.key {
		case "lapses": // taken over: one attempt more, a fence of now
			require.Equal(t, uint32(2), got.Record.Attempt)
			require.Equal(t, uint64(clock().UnixMicro()), got.Record.Fence)
		case "absent": // as the claim statement makes a new row
			require.Equal(t, uint32(1), got.Record.Attempt)
			require.Equal(t, uint64(clock().UnixMicro()), got.Record.Fence)
			r, err := s.Get(ctx, c.key)
			require.NoError(t, err)
			require.Equal(t, got.Record, r, "the record the claim reported is the stored one")
		}
		require.Equal(t, stmtInsert, log.take()[0], "%s: written first", c.key)
	}

	// In InTx, writing first writes in the caller's transaction.
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		s.claimHint.Store(claimHintMax)
		got, err := tx.Claim(ctx, "done", "fp", other, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Completed, got.Outcome)
		got, err = tx.Claim(ctx, "in-tx", "fp", other, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, got.Outcome)
		return nil
	}))
	r, err := s.Get(ctx, "in-tx")
	require.NoError(t, err)
	require.Equal(t, other, r.Token)
}

// TestWriteFirstRecordIsSuccessors: the record a claim that writes first
// reports for a new key (built in Go, the INSERT returning nothing) is the
// row the INSERT stored, with store.Successor's Attempt and Fence for a key
// with no record, and the same record the claim statement's RETURNING
// gives a claim that reads first, at every clock: the Unix epoch and
// before it (a fence of 1), 1µs, today and far ahead.
func TestWriteFirstRecordIsSuccessors(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(0, 0), time.Unix(-10, 0), time.UnixMicro(1), time.UnixMicro(2),
		time.Unix(1_700_000_000, 123_456_000), time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		t.Run(at.UTC().Format(time.RFC3339Nano), func(t *testing.T) {
			s := newTestStore(t, WithClock(func() time.Time { return at }))
			ctx := t.Context()
			log := logStmts(s)
			tok := store.NewToken()
			claim := func(key string, hint int32, want stmtID) store.Record {
				t.Helper()
				s.claimHint.Store(hint)
				log.take()
				c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
				require.NoError(t, err)
				require.Equal(t, store.Acquired, c.Outcome)
				require.Contains(t, log.take(), want)
				return c.Record
			}
			wrote := claim("write-first", claimHintMax, stmtInsert)
			read := claim("read-first", -claimHintMax, stmtClaim)
			attempt, fence := store.Successor(store.Record{}, false, tok, at)
			require.Equal(t, attempt, wrote.Attempt)
			require.Equal(t, fence, wrote.Fence)
			stored, err := s.Get(ctx, "write-first")
			require.NoError(t, err)
			require.Equal(t, stored, wrote, "the record reported is the row stored")
			read.Key = wrote.Key
			require.Equal(t, read, wrote, "writing first reports what reading first does")
		})
	}
}
