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
// deletes every expired one, keeps the live ones and returns promptly (it
// does not wait out a batch for entries that will not come), and Release's
// markers go too.
func TestPurgeManyKeys(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc)
	const expired, live = 300, 5
	for i := range expired {
		_, err := s.Claim(ctx, fmt.Sprint("gone", i), "fp", store.NewToken(), 50*time.Millisecond)
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
	time.Sleep(100 * time.Millisecond) // the leases lapse on the servers' clock: time is the subject

	began := time.Now()
	n, err := s.Purge(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, expired, n, "records deleted (markers are not counted)")
	assert.Less(t, time.Since(began), 4*time.Second, "Purge waited for a batch to fill")
	for i := range live {
		_, err := s.Get(ctx, fmt.Sprint("live", i))
		require.NoError(t, err)
	}
	n, err = s.Purge(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(ctx, "KV_"+s.Bucket())
	require.NoError(t, err)
	assert.EqualValues(t, live+1, st.CachedInfo().State.Msgs, "the live records and the clock entry are left, no marker")
}
