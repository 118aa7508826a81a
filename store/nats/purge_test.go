package nats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// Purge reads the bucket in batches of 256: with more keys than that, it
// deletes every expired one, keeps the live ones and the lapsed leases
// (for store.LapsedKept) and returns promptly (it does not wait out a batch
// for entries that will not come), and Release's markers go too.
func TestPurgeManyKeys(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	const expired, live, lapsed = 300, 5, 3
	for i := range expired {
		tok := store.NewToken()
		_, err := s.Claim(ctx, fmt.Sprint("gone", i), "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, fmt.Sprint("gone", i), tok, []byte("r"), 50*time.Millisecond))
	}
	for i := range lapsed {
		_, err := s.Claim(ctx, fmt.Sprint("lapsed", i), "fp", store.NewToken(), 50*time.Millisecond)
		require.NoError(t, err)
	}
	for i := range live {
		_, err := s.Claim(ctx, fmt.Sprint("live", i), "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
	}
	tok := store.NewToken()
	_, err := s.Claim(ctx, "released", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, "released", tok))
	time.Sleep(100 * time.Millisecond) // the deadlines pass on the servers' clock: time is the subject

	began := time.Now()
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, expired, n, "records deleted (markers are not counted)")
	assert.Less(t, time.Since(began), 4*time.Second, "Purge waited for a batch to fill")
	for i := range live {
		_, err := s.Get(ctx, fmt.Sprint("live", i))
		require.NoError(t, err)
	}
	for i := range lapsed {
		k := fmt.Sprint("lapsed", i)
		_, err := s.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, "a lapsed lease is absent to Get")
		e, err := s.Lookup(ctx, k)
		require.NoError(t, err, "a lapsed lease is kept store.LapsedKept")
		assert.Equal(t, store.StateLapsed, e.State)
		assert.EqualValues(t, 1, e.Attempt)
	}
	n, err = s.Purge(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(ctx, "KV_"+s.Bucket())
	require.NoError(t, err)
	assert.EqualValues(t, live+lapsed+1, st.CachedInfo().State.Msgs, "the live records, the lapsed leases and the clock entry are left, no marker")
}
