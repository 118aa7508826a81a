package nats_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
)

// subject is the bucket subject of key's entry.
func subject(s *idemnats.Store, key string) string {
	return "$KV." + s.Bucket() + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// lastSeq returns the revision of key's latest message (0 for none), to
// tell whether a call wrote anything.
func lastSeq(t *testing.T, nc *natsgo.Conn, s *idemnats.Store, key string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), "KV_"+s.Bucket())
	require.NoError(t, err)
	m, err := st.GetLastMsgForSubject(t.Context(), subject(s, key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0
	}
	require.NoError(t, err)
	return m.Sequence
}

// lapse waits until a lease of d, granted just now, is over on the
// servers' clock.
func lapse(d time.Duration) { time.Sleep(d + 150*time.Millisecond) }

// TestRenew checks every case of Renew's row of the state table: only a
// live lease held by the token is extended; everything else is
// store.ErrLeaseLost and writes nothing.
func TestRenew(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	const short = 200 * time.Millisecond

	t.Run("LiveOwnLease", func(t *testing.T) {
		tok := store.NewToken()
		c, err := s.Claim(ctx, "live", "fp", tok, short)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		require.NoError(t, s.Renew(ctx, "live", tok, time.Minute))
		lapse(short)
		r, err := s.Get(ctx, "live")
		require.NoError(t, err, "the renewed lease outlives the first one")
		assert.Equal(t, tok, r.Token)
		assert.WithinDuration(t, time.Now().Add(time.Minute), r.LockedUntil, 5*time.Second)
		assert.Equal(t, c.Record.Attempt, r.Attempt, "Renew keeps the attempt")
		assert.Equal(t, c.Record.Fence, r.Fence, "Renew keeps the fence")
		// The renewed lease still completes, and keeps the fence.
		require.NoError(t, s.Complete(ctx, "live", tok, []byte("done"), time.Minute))
		r, err = s.Get(ctx, "live")
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, r.Status)
		assert.Equal(t, c.Record.Fence, r.Fence, "Complete keeps the fence")
		assert.EqualValues(t, 1, r.Attempt)
	})

	refused := func(t *testing.T, key string, tok store.Token) {
		t.Helper()
		before := lastSeq(t, nc, s, key)
		err := s.Renew(ctx, key, tok, time.Minute)
		require.ErrorIs(t, err, store.ErrLeaseLost)
		assert.Equal(t, before, lastSeq(t, nc, s, key), "a refused Renew wrote to the key")
	}

	t.Run("Absent", func(t *testing.T) {
		refused(t, "never", store.NewToken())
		_, err := s.Get(ctx, "never")
		require.ErrorIs(t, err, store.ErrNotFound)
	})
	t.Run("Released", func(t *testing.T) {
		tok := store.NewToken()
		_, err := s.Claim(ctx, "released", "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, "released", tok))
		refused(t, "released", tok)
		_, err = s.Get(ctx, "released")
		require.ErrorIs(t, err, store.ErrNotFound, "Renew revived a released key")
	})
	t.Run("Lapsed", func(t *testing.T) {
		tok := store.NewToken()
		_, err := s.Claim(ctx, "lapsed", "fp", tok, short)
		require.NoError(t, err)
		lapse(short)
		refused(t, "lapsed", tok)
		_, err = s.Get(ctx, "lapsed")
		require.ErrorIs(t, err, store.ErrNotFound, "Renew revived a lapsed lease")
	})
	t.Run("CompletedBySameToken", func(t *testing.T) {
		tok := store.NewToken()
		_, err := s.Claim(ctx, "completed", "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, "completed", tok, []byte("r"), time.Minute))
		refused(t, "completed", tok)
		r, err := s.Get(ctx, "completed")
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, r.Status)
	})
	t.Run("AnotherTokensLease", func(t *testing.T) {
		holder := store.NewToken()
		_, err := s.Claim(ctx, "other", "fp", holder, time.Minute)
		require.NoError(t, err)
		was, err := s.Get(ctx, "other")
		require.NoError(t, err)
		refused(t, "other", store.NewToken())
		r, err := s.Get(ctx, "other")
		require.NoError(t, err)
		assert.Equal(t, holder, r.Token)
		assert.True(t, was.LockedUntil.Equal(r.LockedUntil), "the holder's lease moved")
	})
	t.Run("Invalid", func(t *testing.T) {
		tok := store.NewToken()
		require.ErrorIs(t, s.Renew(ctx, "", tok, time.Minute), store.ErrInvalid)
		require.ErrorIs(t, s.Renew(ctx, "k", "", time.Minute), store.ErrInvalid)
		require.ErrorIs(t, s.Renew(ctx, "k", tok, 0), store.ErrInvalid)
		require.ErrorIs(t, s.Renew(ctx, "k", tok, -time.Second), store.ErrInvalid)
	})
	t.Run("CancelledContext", func(t *testing.T) {
		tok := store.NewToken()
		_, err := s.Claim(ctx, "cancelled", "fp", tok, time.Minute)
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		before := lastSeq(t, nc, s, "cancelled")
		require.ErrorIs(t, s.Renew(cctx, "cancelled", tok, time.Hour), context.Canceled)
		assert.Equal(t, before, lastSeq(t, nc, s, "cancelled"))
	})
}

// TestTakeover checks Attempt and Fence across a takeover: attempt 2, a
// larger fence, and the first holder refused (Complete, Renew), its
// Release a no-op.
func TestTakeover(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	const short = 200 * time.Millisecond

	first, second := store.NewToken(), store.NewToken()
	c1, err := s.Claim(ctx, "k", "fp", first, short)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c1.Outcome)
	assert.EqualValues(t, 1, c1.Record.Attempt)
	assert.GreaterOrEqual(t, c1.Record.Fence, uint64(time.Now().Add(-time.Minute).UnixMicro()), "a fresh fence is the clock in µs")
	assert.False(t, c1.Takeover())

	// A re-entrant claim keeps both.
	again, err := s.Claim(ctx, "k", "fp", first, short)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, again.Outcome)
	assert.Equal(t, c1.Record.Attempt, again.Record.Attempt)
	assert.Equal(t, c1.Record.Fence, again.Record.Fence)

	lapse(short)
	// The first holder's Release of its lapsed lease leaves it alone.
	require.NoError(t, s.Release(ctx, "k", first))
	e, err := s.Lookup(ctx, "k")
	require.NoError(t, err, "Release deleted a lapsed lease")
	assert.Equal(t, store.StateLapsed, e.State)

	c2, err := s.Claim(ctx, "k", "fp", second, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c2.Outcome)
	assert.EqualValues(t, 2, c2.Record.Attempt)
	assert.Greater(t, c2.Record.Fence, c1.Record.Fence)
	assert.True(t, c2.Takeover())

	require.ErrorIs(t, s.Complete(ctx, "k", first, []byte("stale"), time.Minute), store.ErrLeaseLost)
	require.ErrorIs(t, s.Renew(ctx, "k", first, time.Minute), store.ErrLeaseLost)
	r, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, second, r.Token)
	assert.EqualValues(t, 2, r.Attempt)
	assert.Equal(t, c2.Record.Fence, r.Fence)
	e, err = s.Lookup(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 2, e.Attempt)
	assert.Equal(t, c2.Record.Fence, e.Fence)

	require.NoError(t, s.Complete(ctx, "k", second, []byte("ok"), short))
	r, err = s.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Attempt, "the completed record keeps the attempt that completed it")
	assert.Equal(t, c2.Record.Fence, r.Fence)

	// Over an expired completed record a claim counts from 1, fence larger.
	lapse(short)
	c3, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c3.Outcome)
	assert.EqualValues(t, 1, c3.Record.Attempt)
	assert.Greater(t, c3.Record.Fence, c2.Record.Fence)

	// After a release a claim counts from 1 too.
	tok := store.NewToken()
	_, err = s.Claim(ctx, "rel", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, "rel", tok))
	c4, err := s.Claim(ctx, "rel", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, c4.Record.Attempt)
}

// TestRenewRacesRelease: a heartbeat that reaches the store around the
// holder's Release never keeps the key: after both, the key is free and
// the next claim acquires it as attempt 1.
func TestRenewRacesRelease(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	renewed, lost := 0, 0
	for i := range 30 {
		key := "race" + strconv.Itoa(i)
		tok := store.NewToken()
		_, err := s.Claim(ctx, key, "fp", tok, time.Minute)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var renewErr, releaseErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; renewErr = s.Renew(ctx, key, tok, time.Hour) }()
		go func() { defer wg.Done(); <-start; releaseErr = s.Release(ctx, key, tok) }()
		close(start)
		wg.Wait()
		require.NoError(t, releaseErr)
		switch {
		case renewErr == nil:
			renewed++
		case errors.Is(renewErr, store.ErrLeaseLost):
			lost++
		default:
			t.Fatalf("Renew: %v", renewErr)
		}
		_, err = s.Get(ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "round %d: the key is held after Release (Renew %v)", i, renewErr)
		c, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome, "round %d", i)
		assert.EqualValues(t, 1, c.Record.Attempt, "round %d", i)
	}
	t.Logf("renewals before the release: %d, after: %d", renewed, lost)
	// A renewal that arrives after the release, for certain.
	tok := store.NewToken()
	_, err := s.Claim(ctx, "late", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, "late", tok))
	require.ErrorIs(t, s.Renew(ctx, "late", tok, time.Hour), store.ErrLeaseLost)
	c, err := s.Claim(ctx, "late", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.EqualValues(t, 1, c.Record.Attempt)
}

// putV1 writes key's entry as the Store wrote it before Attempt and Fence
// (record version 1: no attempt, no fence, no Idemkit-Kept header).
func putV1(t *testing.T, nc *natsgo.Conn, s *idemnats.Store, key string, st store.Status, fp string, tok store.Token, resp []byte, life time.Duration) {
	t.Helper()
	b := []byte{1, byte(st)}
	b = binary.AppendUvarint(b, uint64(len(fp)))
	b = append(b, fp...)
	b = binary.AppendUvarint(b, uint64(len(tok)))
	b = append(b, tok...)
	b = append(b, resp...)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	m := &natsgo.Msg{Subject: subject(s, key), Header: natsgo.Header{}, Data: b}
	m.Header.Set("Idemkit-Life", strconv.FormatInt(int64(life), 10))
	_, err = js.PublishMsg(t.Context(), m)
	require.NoError(t, err)
}

// TestVersion1Records: records written before Attempt and Fence still
// read (Attempt 0, Fence 0), renew, complete, are taken over as attempt 2,
// and Purge keeps a lapsed one LapsedKept (reading its body, since it has
// no Idemkit-Kept header) but deletes an expired completed one.
func TestVersion1Records(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	const short = 200 * time.Millisecond
	tok := store.NewToken()

	putV1(t, nc, s, "live", store.StatusInProgress, "fp", tok, nil, time.Minute)
	r, err := s.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, store.StatusInProgress, r.Status)
	assert.Equal(t, tok, r.Token)
	assert.Zero(t, r.Attempt)
	assert.Zero(t, r.Fence)
	require.NoError(t, s.Renew(ctx, "live", tok, time.Minute))
	c, err := s.Claim(ctx, "live", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.Zero(t, c.Record.Attempt, "a re-entrant claim keeps an old record's attempt")
	require.NoError(t, s.Complete(ctx, "live", tok, []byte("r"), time.Minute))
	r, err = s.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, []byte("r"), r.Response)

	putV1(t, nc, s, "done", store.StatusCompleted, "fp", tok, []byte("old response"), time.Minute)
	c, err = s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	assert.Equal(t, []byte("old response"), c.Record.Response)
	assert.Zero(t, c.Record.Attempt)

	putV1(t, nc, s, "lapsed", store.StatusInProgress, "fp", tok, nil, short)
	putV1(t, nc, s, "takeover", store.StatusInProgress, "fp", tok, nil, short)
	putV1(t, nc, s, "expired", store.StatusCompleted, "fp", tok, []byte("x"), short)
	lapse(short)
	c, err = s.Claim(ctx, "takeover", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.EqualValues(t, 2, c.Record.Attempt, "a takeover of an old lease is its second attempt")
	assert.Greater(t, c.Record.Fence, uint64(0))

	n, err := s.Purge(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "Purge deletes the expired completed record only")
	_, err = s.Lookup(ctx, "expired")
	require.ErrorIs(t, err, store.ErrNotFound)
	e, err := s.Lookup(ctx, "lapsed")
	require.NoError(t, err, "Purge deleted an old lapsed lease")
	assert.Equal(t, store.StateLapsed, e.State)
}
