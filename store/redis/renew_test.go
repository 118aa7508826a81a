package redis_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// lapseEnv is a Store on one server with a way to let a lease lapse: the
// suite's clock on miniredis, real time on Redis and the Cluster.
type lapseEnv struct {
	s      *redis.Store
	c      goredis.UniversalClient
	prefix string
	lease  time.Duration         // a short lease, which lapse outlives
	lapse  func(d time.Duration) // let d pass on the server's clock
	now    func() time.Time      // the Store's clock
}

// eachServer runs f on miniredis, the real Redis and the Cluster, with
// Stores made with opts.
func eachServer(t *testing.T, f func(t *testing.T, e lapseEnv), opts ...redis.Option) {
	t.Run("Miniredis", func(t *testing.T) {
		mr, c := newMini(t)
		clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		p := testPrefix(t, c)
		s := redis.MustNew(t, c, append([]redis.Option{redis.WithPrefix(p), redis.WithClock(clock.Now), redis.WithEvictionCheck(false)}, opts...)...)
		f(t, lapseEnv{s: s, c: c, prefix: p, lease: time.Second, lapse: clock.Advance, now: clock.Now})
	})
	for _, srv := range []struct {
		name   string
		client func(*testing.T) goredis.UniversalClient
	}{
		{"Redis", func(t *testing.T) goredis.UniversalClient { return realClient(t) }},
		{"Cluster", func(t *testing.T) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(srv.name, func(t *testing.T) {
			c := srv.client(t)
			p := testPrefix(t, c)
			s := redis.MustNew(t, c, append([]redis.Option{redis.WithPrefix(p), redis.WithPersistenceCheck(false)}, opts...)...)
			f(t, lapseEnv{s: s, c: c, prefix: p, lease: 150 * time.Millisecond, lapse: func(d time.Duration) { time.Sleep(d) }, now: time.Now})
		})
	}
}

// raw returns the stored value of key and its PTTL ("" and a negative
// PTTL when the key is absent).
func (e lapseEnv) raw(t *testing.T, key string) (string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	v, err := e.c.Get(ctx, e.prefix+key).Result()
	if errors.Is(err, goredis.Nil) {
		return "", -2
	}
	require.NoError(t, err)
	ttl, err := e.c.PTTL(ctx, e.prefix+key).Result()
	require.NoError(t, err)
	return v, ttl
}

// TestRenewCases: each row of the state table for Renew. Only the token's
// own live lease is extended (to now+lease, Attempt and Fence kept);
// every other case returns ErrLeaseLost and leaves the key byte for byte
// as it was, absent keys absent.
func TestRenewCases(t *testing.T) {
	eachServer(t, func(t *testing.T, e lapseEnv) {
		ctx := context.Background()
		s := e.s
		tok, other := store.NewToken(), store.NewToken()

		// Absent, never claimed: nothing is created.
		require.ErrorIs(t, s.Renew(ctx, "absent", tok, time.Minute), store.ErrLeaseLost)
		v, _ := e.raw(t, "absent")
		assert.Empty(t, v, "Renew created a record")

		// Its own live lease: extended, Attempt and Fence kept.
		c, err := s.Claim(ctx, "mine", "fp", tok, e.lease)
		require.NoError(t, err)
		require.NoError(t, s.Renew(ctx, "mine", tok, time.Hour))
		r, err := s.Get(ctx, "mine")
		require.NoError(t, err)
		assert.Equal(t, c.Record.Attempt, r.Attempt)
		assert.Equal(t, c.Record.Fence, r.Fence)
		assert.True(t, r.LockedUntil.After(c.Record.LockedUntil.Add(50*time.Minute)), "LockedUntil %v, claimed until %v", r.LockedUntil, c.Record.LockedUntil)
		_, ttl := e.raw(t, "mine")
		assert.Greater(t, ttl, store.LapsedKept+59*time.Minute, "PTTL after renewing for an hour")
		assert.LessOrEqual(t, ttl, store.LapsedKept+time.Hour)
		e.lapse(2 * e.lease)
		got, err := s.Claim(ctx, "mine", "fp", other, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.InProgress, got.Outcome, "the renewed lease outlives its first lease")

		// Another token's live lease.
		before, _ := e.raw(t, "mine")
		require.ErrorIs(t, s.Renew(ctx, "mine", other, time.Hour), store.ErrLeaseLost)
		after, _ := e.raw(t, "mine")
		assert.Equal(t, before, after, "another token's Renew changed the record")

		// Completed, by the same token: a completed record is never
		// brought back in progress.
		require.NoError(t, s.Complete(ctx, "mine", tok, []byte("r"), time.Hour))
		before, _ = e.raw(t, "mine")
		require.ErrorIs(t, s.Renew(ctx, "mine", tok, time.Hour), store.ErrLeaseLost)
		after, _ = e.raw(t, "mine")
		assert.Equal(t, before, after, "Renew changed a completed record")
		r, err = s.Get(ctx, "mine")
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, r.Status)

		// Released: the key stays absent.
		_, err = s.Claim(ctx, "released", "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, "released", tok))
		require.ErrorIs(t, s.Renew(ctx, "released", tok, time.Minute), store.ErrLeaseLost)
		v, _ = e.raw(t, "released")
		assert.Empty(t, v, "Renew after Release revived the record")

		// Lapsed, own lease: not revived, left kept as it was.
		_, err = s.Claim(ctx, "lapsed", "fp", tok, e.lease)
		require.NoError(t, err)
		e.lapse(e.lease + e.lease/2)
		before, _ = e.raw(t, "lapsed")
		require.NotEmpty(t, before, "the lapsed record is kept")
		require.ErrorIs(t, s.Renew(ctx, "lapsed", tok, time.Hour), store.ErrLeaseLost)
		after, ttl = e.raw(t, "lapsed")
		assert.Equal(t, before, after, "Renew changed a lapsed record")
		assert.LessOrEqual(t, ttl, store.LapsedKept, "Renew extended a lapsed lease")
		_, err = s.Get(ctx, "lapsed")
		require.ErrorIs(t, err, store.ErrNotFound)

		// Arguments and context.
		require.ErrorIs(t, s.Renew(ctx, "k", tok, 0), store.ErrInvalid)
		require.ErrorIs(t, s.Renew(ctx, "", tok, time.Second), store.ErrInvalid)
		require.ErrorIs(t, s.Renew(ctx, "k", "", time.Second), store.ErrInvalid)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.Renew(cctx, "mine", tok, time.Second), context.Canceled)
	})
}

// TestTakeover: a claim of a lapsed lease counts attempt 2 with a larger
// fence; the first holder can then neither complete, renew nor release,
// and the completed record keeps the takeover's Attempt and Fence.
func TestTakeover(t *testing.T) {
	eachServer(t, func(t *testing.T, e lapseEnv) {
		ctx := context.Background()
		s := e.s
		first, second := store.NewToken(), store.NewToken()
		c1, err := s.Claim(ctx, "k", "fp", first, e.lease)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c1.Outcome)
		assert.Equal(t, uint32(1), c1.Record.Attempt)
		assert.False(t, c1.Takeover())
		assert.GreaterOrEqual(t, c1.Record.Fence, uint64(c1.Record.LockedUntil.Add(-e.lease).UnixMicro()), "a fresh fence is the clock in µs")

		e.lapse(e.lease + e.lease/2)
		c2, err := s.Claim(ctx, "k", "fp2", second, time.Minute) // a lapsed lease is absent: any fingerprint
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c2.Outcome)
		assert.Equal(t, uint32(2), c2.Record.Attempt)
		assert.True(t, c2.Takeover())
		assert.Greater(t, c2.Record.Fence, c1.Record.Fence)
		assert.Equal(t, "fp2", c2.Record.Fingerprint)

		require.ErrorIs(t, s.Complete(ctx, "k", first, []byte("stale"), time.Hour), store.ErrLeaseLost)
		require.ErrorIs(t, s.Renew(ctx, "k", first, time.Hour), store.ErrLeaseLost)
		require.NoError(t, s.Release(ctx, "k", first))
		r, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, second, r.Token)
		assert.Equal(t, c2.Record.Attempt, r.Attempt)
		assert.Equal(t, c2.Record.Fence, r.Fence)

		// A re-entrant claim keeps them.
		c3, err := s.Claim(ctx, "k", "fp2", second, time.Minute)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c3.Outcome)
		assert.Equal(t, c2.Record.Attempt, c3.Record.Attempt)
		assert.Equal(t, c2.Record.Fence, c3.Record.Fence)

		require.NoError(t, s.Complete(ctx, "k", second, []byte("done"), time.Hour))
		r, err = s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, r.Status)
		assert.Equal(t, c2.Record.Attempt, r.Attempt)
		assert.Equal(t, c2.Record.Fence, r.Fence)
		rep, err := s.Claim(ctx, "k", "fp2", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Completed, rep.Outcome)
		assert.Equal(t, c2.Record.Fence, rep.Record.Fence)

		// A third attempt after another lapse.
		_, err = s.Claim(ctx, "k3", "fp", first, e.lease)
		require.NoError(t, err)
		e.lapse(e.lease + e.lease/2)
		_, err = s.Claim(ctx, "k3", "fp", second, e.lease)
		require.NoError(t, err)
		e.lapse(e.lease + e.lease/2)
		c, err := s.Claim(ctx, "k3", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, uint32(3), c.Record.Attempt)

		// Released, the next claim counts from 1 again, with a larger fence.
		third := store.NewToken()
		require.NoError(t, s.Release(ctx, "k3", c.Record.Token))
		e.lapse(time.Millisecond)
		c4, err := s.Claim(ctx, "k3", "fp", third, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, uint32(1), c4.Record.Attempt)
		assert.Greater(t, c4.Record.Fence, c.Record.Fence)
	})
}

// TestLapsedKept: a lapsed lease stays stored LapsedKept after its lease
// (PTTL about lease+LapsedKept from the claim), absent to Get and Claim, a
// Release of its own token leaves it, and the Inspector lists it lapsed.
func TestLapsedKept(t *testing.T) {
	eachServer(t, func(t *testing.T, e lapseEnv) {
		ctx := context.Background()
		s := e.s
		tok := store.NewToken()
		c, err := s.Claim(ctx, "k", "fp", tok, e.lease)
		require.NoError(t, err)
		_, ttl := e.raw(t, "k")
		assert.Greater(t, ttl, store.LapsedKept+e.lease-100*time.Millisecond, "PTTL of a fresh claim")
		assert.LessOrEqual(t, ttl, store.LapsedKept+e.lease)

		e.lapse(e.lease + e.lease/2)
		v, ttl := e.raw(t, "k")
		require.NotEmpty(t, v, "the lapsed record is kept")
		assert.LessOrEqual(t, ttl, store.LapsedKept)
		assert.Greater(t, ttl, store.LapsedKept-time.Minute)
		_, err = s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)

		require.NoError(t, s.Release(ctx, "k", tok))
		after, _ := e.raw(t, "k")
		assert.Equal(t, v, after, "Release of a lapsed lease changed it")

		// Nor does any completion path complete it for its old holder.
		for name, st := range map[string]*redis.Store{
			"script":  s,
			"watched": redis.WatchEveryComplete(redis.MustNew(t, e.c, redis.WithPrefix(e.prefix), redis.WithClock(e.now), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))),
			"staged":  redis.StageEveryComplete(redis.MustNew(t, e.c, redis.WithPrefix(e.prefix), redis.WithClock(e.now), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))),
		} {
			if name == "staged" {
				redis.RememberFingerprint(st, "k", tok, "fp")
			}
			require.ErrorIs(t, st.Complete(ctx, "k", tok, []byte("late"), time.Hour), store.ErrLeaseLost, name)
			after, _ = e.raw(t, "k")
			assert.Equal(t, v, after, "%s: Complete of a lapsed lease changed it", name)
		}

		ent, err := s.Lookup(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, store.StateLapsed, ent.State)
		assert.Equal(t, c.Record.Attempt, ent.Attempt)
		assert.Equal(t, c.Record.Fence, ent.Fence)
		assert.Equal(t, store.HashToken(tok), ent.TokenHash)
		p, err := s.List(ctx, store.ListOptions{State: store.StateLapsed})
		require.NoError(t, err)
		require.Len(t, p.Entries, 1)
		assert.Equal(t, "k", p.Entries[0].Key)
		p, err = s.List(ctx, store.ListOptions{State: store.StateInProgress})
		require.NoError(t, err)
		assert.Empty(t, p.Entries)
		n, err := s.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n.Lapsed)
		assert.Equal(t, int64(0), n.InProgress)

		// Claim sees it absent (another fingerprint acquires), and counts
		// one attempt more.
		c2, err := s.Claim(ctx, "k", "other", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Acquired, c2.Outcome)
		assert.Equal(t, uint32(2), c2.Record.Attempt)
		ent, err = s.Lookup(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, store.StateInProgress, ent.State)
		assert.Equal(t, uint32(2), ent.Attempt)
	})
}

// TestLapsedKeptExpires: on miniredis, whose clock the test moves, the
// lapsed record is gone LapsedKept after its lease, and a claim then
// counts from 1.
func TestLapsedKeptExpires(t *testing.T) {
	mr, c := newMini(t)
	clock := testredis.NewMiniClock(mr, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := redis.MustNew(t, c, redis.WithPrefix("p:"), redis.WithClock(clock.Now), redis.WithEvictionCheck(false))
	ctx := context.Background()
	_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Second)
	require.NoError(t, err)
	clock.Advance(time.Second + store.LapsedKept - time.Millisecond)
	assert.True(t, mr.Exists("p:k"), "deleted before LapsedKept was over")
	clock.Advance(time.Millisecond)
	assert.False(t, mr.Exists("p:k"), "kept after LapsedKept was over")
	got, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), got.Record.Attempt)
}

// TestRenewRacesRelease: a renewal that reaches Redis after the holder
// released its key (a heartbeat in flight) must not bring the key back.
// Goroutines race Release and Renew on many keys; whichever wins, the key
// ends absent, and the next claim acquires it with Attempt 1.
func TestRenewRacesRelease(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprintf("coalescing=%v", coalesce), func(t *testing.T) {
			eachServer(t, func(t *testing.T, e lapseEnv) {
				ctx := context.Background()
				s := e.s
				const keys = 200
				toks := make([]store.Token, keys)
				for i := range keys {
					toks[i] = store.NewToken()
					_, err := s.Claim(ctx, "k"+strconv.Itoa(i), "fp", toks[i], time.Minute)
					require.NoError(t, err)
				}
				var wg sync.WaitGroup
				errs := make(chan error, 2*keys)
				start := make(chan struct{})
				for i := range keys {
					key := "k" + strconv.Itoa(i)
					wg.Add(2)
					go func() {
						defer wg.Done()
						<-start
						errs <- s.Release(ctx, key, toks[i])
					}()
					go func() {
						defer wg.Done()
						<-start
						if err := s.Renew(ctx, key, toks[i], time.Hour); err != nil && !errors.Is(err, store.ErrLeaseLost) {
							errs <- err
						}
					}()
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				for i := range keys {
					key := "k" + strconv.Itoa(i)
					v, _ := e.raw(t, key)
					require.Empty(t, v, "key %s: a renewal brought the released key back", key)
					c, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
					require.NoError(t, err)
					require.Equal(t, store.Acquired, c.Outcome, key)
					require.Equal(t, uint32(1), c.Record.Attempt, key)
				}
			}, redis.WithCoalescing(coalesce))
		})
	}
}

// v1Value returns a value of the layout earlier releases wrote (version 1,
// no Attempt and Fence): version, status, token length, fingerprint
// length, time in Unix ms, token, fingerprint, response.
func v1Value(status byte, token store.Token, fp string, at time.Time, response string) string {
	b := []byte{1, status, byte(len(token))}
	b = binary.BigEndian.AppendUint16(b, uint16(len(fp)))
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
	return string(b) + string(token) + fp + response
}

// TestOldLayout: records written before Attempt and Fence (value version
// 1, PX of the bare lease) are still served: read with Attempt 0 and
// Fence 0, replayed, renewed, re-claimed and completed by their holder,
// and refused to others.
func TestOldLayout(t *testing.T) {
	eachServer(t, func(t *testing.T, e lapseEnv) {
		ctx := context.Background()
		s := e.s
		tok, done := store.NewToken(), store.NewToken()
		until := time.Now().Add(time.Minute)
		require.NoError(t, e.c.Set(ctx, e.prefix+"held", v1Value(1, tok, "fp", until, ""), time.Minute).Err())
		require.NoError(t, e.c.Set(ctx, e.prefix+"done", v1Value(2, done, "fp", until, "old response"), time.Minute).Err())

		r, err := s.Get(ctx, "held")
		require.NoError(t, err)
		assert.Equal(t, store.StatusInProgress, r.Status)
		assert.Equal(t, tok, r.Token)
		assert.Equal(t, uint32(0), r.Attempt)
		assert.Equal(t, uint64(0), r.Fence)
		assert.Equal(t, until.UnixMilli(), r.LockedUntil.UnixMilli())

		c, err := s.Claim(ctx, "held", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.InProgress, c.Outcome)
		c, err = s.Claim(ctx, "held", "fp2", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Mismatch, c.Outcome)
		require.ErrorIs(t, s.Complete(ctx, "held", store.NewToken(), []byte("x"), time.Minute), store.ErrLeaseLost)
		require.ErrorIs(t, s.Renew(ctx, "held", store.NewToken(), time.Minute), store.ErrLeaseLost)

		c, err = s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Completed, c.Outcome)
		assert.Equal(t, "old response", string(c.Record.Response))
		assert.Equal(t, uint32(0), c.Record.Attempt)
		require.NoError(t, s.Complete(ctx, "done", done, []byte("again"), time.Minute), "a retried Complete of an old record")

		// The holder renews and re-claims (Attempt and Fence stay 0), and
		// completes.
		require.NoError(t, s.Renew(ctx, "held", tok, time.Hour))
		_, ttl := e.raw(t, "held")
		assert.Greater(t, ttl, store.LapsedKept+59*time.Minute, "a renewed old lease is kept LapsedKept as a new one")
		c, err = s.Claim(ctx, "held", "fp", tok, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, store.Acquired, c.Outcome)
		assert.Equal(t, uint32(0), c.Record.Attempt)
		assert.Equal(t, uint64(0), c.Record.Fence)
		require.NoError(t, s.Complete(ctx, "held", tok, []byte("new response"), time.Minute))
		r, err = s.Get(ctx, "held")
		require.NoError(t, err)
		assert.Equal(t, store.StatusCompleted, r.Status)
		assert.Equal(t, "new response", string(r.Response))

		// An old record in progress completes straight from version 1,
		// through each completion path, and releases.
		for _, key := range []string{"script", "watched", "large"} {
			owner := store.NewToken()
			require.NoError(t, e.c.Set(ctx, e.prefix+key, v1Value(1, owner, "fp", until, ""), time.Minute).Err())
			resp := []byte("resp " + key)
			if key == "large" {
				resp = make([]byte, 100<<10)
			}
			st := s
			if key == "watched" {
				st = redis.WatchEveryComplete(redis.MustNew(t, e.c, redis.WithPrefix(e.prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false)))
			}
			require.NoError(t, st.Complete(ctx, key, owner, resp, time.Minute), key)
			r, err := s.Get(ctx, key)
			require.NoError(t, err, key)
			assert.Equal(t, store.StatusCompleted, r.Status, key)
			assert.Equal(t, resp, r.Response, key)
			assert.Equal(t, owner, r.Token, key)
		}
		owner := store.NewToken()
		require.NoError(t, e.c.Set(ctx, e.prefix+"rel", v1Value(1, owner, "fp", until, ""), time.Minute).Err())
		require.NoError(t, s.Release(ctx, "rel", store.NewToken()))
		v, _ := e.raw(t, "rel")
		require.NotEmpty(t, v, "another token released an old record")
		require.NoError(t, s.Release(ctx, "rel", owner))
		v, _ = e.raw(t, "rel")
		require.Empty(t, v, "the holder could not release an old record")

		ent, err := s.Lookup(ctx, "done")
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, ent.State)
		assert.Equal(t, len("old response"), ent.ResponseSize)
	})
}
