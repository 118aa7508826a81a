package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// fn learns which claim of its id it runs under from its context: the
// first delivery is attempt 1; a redelivery that takes over a consumer
// whose lease lapsed is attempt 2, told so, with a larger fence.
func TestProcessSeesAttempt(t *testing.T) {
	subj := newMemory(t)
	d := newDeduper(t, subj.Store, idem.WithLease(time.Hour))
	var got idem.Attempt
	var ok bool
	out, err := d.Process(t.Context(), "evt_attempt", func(ctx context.Context) error {
		got, ok = idem.AttemptFrom(ctx)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, dedup.Processed, out)
	require.True(t, ok, "fn's context carries its Attempt")
	r, err := subj.Store.Get(t.Context(), keyOf(d, "evt_attempt"))
	require.NoError(t, err)
	assert.Equal(t, idem.Attempt{Number: 1, Fence: r.Fence}, got)

	// A consumer claimed the next id and died; its lease lapses.
	const id = "evt_takeover"
	dead, err := subj.Store.Claim(t.Context(), keyOf(d, id), "", store.NewToken(), time.Minute)
	require.NoError(t, err)
	subj.Clock.Advance(time.Hour)
	out, err = d.Process(t.Context(), id, func(ctx context.Context) error {
		got, ok = idem.AttemptFrom(ctx)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, dedup.Processed, out)
	require.True(t, ok)
	assert.Equal(t, uint32(2), got.Number)
	assert.True(t, got.Takeover)
	assert.Greater(t, got.Fence, dead.Record.Fence)
}
