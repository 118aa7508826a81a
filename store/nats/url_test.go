package nats_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/seedtest"
	"github.com/idemkit/idemkit/internal/storesmoke"
	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
)

// openBucket opens nats://…/BUCKET?query on a bucket of the test's own,
// runs Migrate, and deletes the bucket when t ends.
func openBucket(t *testing.T, serverURL, query string) store.Store {
	t.Helper()
	nc := connect(t, serverURL)
	bucket := testBucket(t, nc)
	hosts := strings.ReplaceAll(strings.TrimPrefix(serverURL, "nats://"), ",nats://", ",")
	u := "nats://" + hosts + "/" + bucket
	if query != "" {
		u += "?" + query
	}
	st, err := store.Open(t.Context(), u)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close(st) })
	require.NoError(t, store.Migrate(t.Context(), st))
	require.NoError(t, store.Migrate(t.Context(), st), "Migrate again is harmless")
	return st
}

func TestOpenURL(t *testing.T) {
	st := openBucket(t, natsURL(t), "connect_timeout=2s")
	_, ok := st.(*idemnats.Store)
	require.True(t, ok, "%T", st)
	storesmoke.Run(t, st)
	require.NoError(t, store.Close(st))
	// The Store owned its connection: it is closed now.
	_, err := st.Get(context.Background(), "any")
	require.Error(t, err)
}

// The seeds' exercise (ten parallel POSTs make one payment, replay, 422,
// ten deliveries one effect) on a store opened from the URL.
func TestSeeds(t *testing.T) {
	seedtest.Run(t, openBucket(t, natsURL(t), ""))
}

func TestOpenURLRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"nats://127.0.0.1:1", "no bucket"},
		{"nats://127.0.0.1:1/", "no bucket"},
		{"nats:///b", "no server"},
		{"nats://127.0.0.1:1/a.b", "bucket name"},
		{"nats://127.0.0.1:1/b?replica=3", "replica"},
		{"nats://127.0.0.1:1/b?replicas=0", "WithReplicas"},
		{"nats://127.0.0.1:1/b?replicas=three", "not an integer"},
		{"nats://127.0.0.1:1/b?max_value_size=10", "WithMaxValueSize"},
		{"nats://127.0.0.1:1/b?storage=tape", "not file or memory"},
		{"nats://127.0.0.1:1/b?connect_timeout=0s", "connect_timeout"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, err := store.Open(t.Context(), tc.url)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, st)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// A server that never answers makes Open return when its context ends.
func TestOpenURLUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() }) // accepts nothing: no INFO comes
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, err := store.Open(ctx, "nats://user:secret@"+ln.Addr().String()+"/b")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, st)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.NotContains(t, err.Error(), "secret")
}

// A bucket that does not exist is an error that says to run Migrate, not
// ErrNotFound or a silent creation.
func TestNoBucket(t *testing.T) {
	nc := connect(t, natsURL(t))
	s, err := idemnats.New(nc, "idemkit_test_absent_"+strings.ToLower(rand.Text()[:8]))
	require.NoError(t, err)
	_, err = s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
	require.ErrorContains(t, err, "Migrate")
	_, err = s.Get(t.Context(), "k")
	require.ErrorContains(t, err, "Migrate")
	assert.False(t, errors.Is(err, store.ErrNotFound))
}

func TestNewRejects(t *testing.T) {
	nc := connect(t, natsURL(t))
	for name, tc := range map[string]struct {
		bucket string
		opts   []idemnats.Option
	}{
		"nil option":      {"b", []idemnats.Option{nil}},
		"replicas 0":      {"b", []idemnats.Option{idemnats.WithReplicas(0)}},
		"replicas 6":      {"b", []idemnats.Option{idemnats.WithReplicas(6)}},
		"tiny value size": {"b", []idemnats.Option{idemnats.WithMaxValueSize(100)}},
		"empty bucket":    {"", nil},
		"dotted bucket":   {"a.b", nil},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := idemnats.New(nc, tc.bucket, tc.opts...)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
		})
	}
	_, err := idemnats.New(nil, "b")
	require.ErrorIs(t, err, store.ErrInvalid)
}

// Migrate gives the bucket what was asked: history 1, the max value size,
// and refuses a bucket that exists with another replica count.
func TestMigrate(t *testing.T) {
	nc := connect(t, natsURL(t))
	s := newStore(t, nc, idemnats.WithMaxValueSize(64<<10))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(t.Context(), s.Bucket())
	require.NoError(t, err)
	status, err := kv.Status(t.Context())
	require.NoError(t, err)
	assert.EqualValues(t, 1, status.History())
	assert.EqualValues(t, 64<<10, status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxMsgSize)

	again, err := idemnats.New(nc, s.Bucket(), idemnats.WithReplicas(3))
	require.NoError(t, err)
	err = again.Migrate(t.Context())
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, "1 replicas, not the 3 asked for")
}

// A response larger than the bucket keeps is ErrInvalid before anything is
// written (the engine then keeps the key completed without a response);
// one byte less is stored and replayed.
func TestResponseLimit(t *testing.T) {
	nc := connect(t, natsURL(t))
	ctx := t.Context()
	s := newStore(t, nc, idemnats.WithMaxValueSize(64<<10))
	tok := store.NewToken()
	limit, err := s.MaxResponse(ctx, "fp", tok)
	require.NoError(t, err)
	require.Greater(t, limit, 50<<10)
	require.Less(t, limit, 64<<10)

	_, err = s.Claim(ctx, "big", "fp", tok, time.Minute)
	require.NoError(t, err)
	err = s.Complete(ctx, "big", tok, make([]byte, limit+1), time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, "larger than bucket")
	r, err := s.Get(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, store.StatusInProgress, r.Status, "nothing written")

	require.NoError(t, s.Complete(ctx, "big", tok, make([]byte, limit), time.Minute))
	c, err := s.Claim(ctx, "big", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Completed, c.Outcome)
	assert.Len(t, c.Record.Response, limit)
}
