package redis_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// TestLeaseLastMillisecond: on the real Redis, a record in progress whose
// PTTL is LapsedKept itself (its lease in its last millisecond, which PTTL
// cannot split) is judged by the deadline in the value against the
// server's TIME, in each script that checks a lease. The value's deadline
// here lies in the past, so every script must find the lease lapsed
// whichever way it decided: Complete and Renew lose it, Release leaves it
// kept, and Claim takes it over (Attempt 2). The key is written with PX
// LapsedKept just before each call, so most calls meet PTTL equal to
// LapsedKept (and TIME) and the rest PTTL below it; both must agree.
func TestLeaseLastMillisecond(t *testing.T) {
	c := realClient(t)
	prefix := testPrefix(t, c)
	s := redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
	ctx := context.Background()
	tok := store.NewToken()
	const fp = "fp"
	// A version-2 record in progress of tok, Attempt 1, Fence 7, whose
	// lease ended a second ago.
	val := []byte{2, 1, byte(len(tok)), 0, byte(len(fp))}
	val = binary.BigEndian.AppendUint64(val, uint64(time.Now().Add(-time.Second).UnixMilli()))
	val = binary.BigEndian.AppendUint32(val, 1)
	val = binary.BigEndian.AppendUint64(val, 7)
	val = append(append(val, tok...), fp...)
	set := func() {
		t.Helper()
		require.NoError(t, c.Set(ctx, prefix+"k", val, store.LapsedKept).Err())
	}
	for range 50 {
		set()
		require.ErrorIs(t, s.Complete(ctx, "k", tok, []byte("late"), time.Hour), store.ErrLeaseLost, "Complete")
		set()
		require.ErrorIs(t, s.Renew(ctx, "k", tok, time.Minute), store.ErrLeaseLost, "Renew")
		set()
		require.NoError(t, s.Release(ctx, "k", tok))
		got, err := c.Get(ctx, prefix+"k").Result()
		require.NoError(t, err)
		require.Equal(t, string(val), got, "Release of a lapsed lease changed it")
		set()
		cl, err := s.Claim(ctx, "k", fp, store.NewToken(), time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, cl.Outcome)
		require.Equal(t, uint32(2), cl.Record.Attempt, "a takeover counts one attempt more")
		require.Greater(t, cl.Record.Fence, uint64(7))
	}
}
