package sqlite

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestClaimReadsFirst: while an InTx holds the Store's write gate, even
// with the Store leaning to write first (claimHint), a claim
// that would change nothing — a replay, a key held by another token, a
// fingerprint mismatch — answers at once from a read and never queues for
// the gate; a claim of a new key does queue (the gate is really held) and
// acquires once the InTx ends.
func TestClaimReadsFirst(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	tok := store.NewToken()
	_, err := s.Claim(ctx, "paid", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "paid", tok, []byte(`{"id":1}`), time.Hour))
	_, err = s.Claim(ctx, "held", "fp", tok, time.Minute)
	require.NoError(t, err)

	var waits atomic.Int32
	queued := make(chan struct{}, 1)
	s.onWait = func() {
		waits.Add(1)
		select {
		case queued <- struct{}{}:
		default:
		}
	}
	// Leaning to write first changes nothing here: a claim writes first
	// only through an open gate.
	s.claimHint.Store(claimHintMax)
	release, done := holdGate(t, s)

	// Bounded, so that a claim that does wait for the gate fails here
	// instead of hanging until the InTx ends.
	quick, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	other := store.NewToken()
	for _, c := range []struct {
		key, fp string
		want    store.Outcome
	}{{"paid", "fp", store.Completed}, {"held", "fp", store.InProgress}, {"paid", "fp2", store.Mismatch}} {
		got, err := s.Claim(quick, c.key, c.fp, other, time.Minute)
		require.NoError(t, err, "claim of %q while the gate is held", c.key)
		require.Equal(t, c.want, got.Outcome, c.key)
	}
	require.Zero(t, waits.Load(), "no claim that changes nothing waits for the write gate")

	res := make(chan store.Claim, 1)
	go func() {
		c, err := s.Claim(ctx, "new", "fp", other, time.Minute)
		if err != nil {
			t.Error(err)
		}
		res <- c
	}()
	<-queued // the new key's claim waits for the gate
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, store.Acquired, (<-res).Outcome)
}
