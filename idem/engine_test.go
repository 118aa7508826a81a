package idem_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

func TestNewRejects(t *testing.T) {
	mem := newMemory(t)
	for name, tc := range map[string]struct {
		s    store.Store
		opts []idem.Option
	}{
		"nil store":       {nil, nil},
		"zero lease":      {mem, []idem.Option{idem.WithLease(0)}},
		"negative lease":  {mem, []idem.Option{idem.WithLease(-time.Second)}},
		"zero retention":  {mem, []idem.Option{idem.WithRetention(0)}},
		"negative wait":   {mem, []idem.Option{idem.WithWait(-time.Second)}},
		"nil logger":      {mem, []idem.Option{idem.WithLogger(nil)}},
		"nil tracer":      {mem, []idem.Option{idem.WithTracer(nil)}},
		"zero margin":     {mem, []idem.Option{idem.WithLeaseFromDeadline(0)}},
		"negative margin": {mem, []idem.Option{idem.WithLeaseFromDeadline(-time.Second)}},
		"nil option":      {mem, []idem.Option{nil}},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := idem.New(tc.s, tc.opts...)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, e)
		})
	}
	e := newEngine(t, mem)
	assert.False(t, e.CanTransact(), "memory has no transactions")
}

func TestRunKeepCompletes(t *testing.T) {
	e := newEngine(t, newMemory(t))
	var c counter
	k := key(t)
	res, err := e.Run(t.Context(), k, "fp", c.keep("first"))
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, res.Outcome)
	assert.Equal(t, idem.SettleCompleted, res.Settle)

	res, err = e.Run(t.Context(), k, "fp", c.keep("second"))
	require.NoError(t, err)
	assert.True(t, res.Replay())
	assert.Equal(t, "first", string(res.Record.Response))
	assert.False(t, res.NotKept)
	assert.EqualValues(t, 1, c.n.Load())
}

func TestRunDiscardReleases(t *testing.T) {
	s := newMemory(t)
	e := newEngine(t, s)
	k := key(t)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Discard("provider said no") })
	require.NoError(t, err)
	assert.Equal(t, idem.SettleReleased, res.Settle)
	_, err = s.Get(t.Context(), k)
	require.ErrorIs(t, err, store.ErrNotFound, "a discarded key is absent")

	var c counter
	res, err = e.Run(t.Context(), k, "", c.keep("ok"))
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, res.Outcome, "the retry runs the work again")
	assert.EqualValues(t, 1, c.n.Load())
}

func TestRunPanicReleases(t *testing.T) {
	s := newMemory(t)
	e := newEngine(t, s)
	k := key(t)
	require.PanicsWithValue(t, "boom", func() {
		_, _ = e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { panic("boom") })
	})
	_, err := s.Get(t.Context(), k)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRunNotKeptCompletesWithoutResponse(t *testing.T) {
	s := newMemory(t)
	e := newEngine(t, s)
	k := key(t)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.KeepWithoutResponse("too large") })
	require.NoError(t, err)
	assert.Equal(t, idem.SettleNotKept, res.Settle)

	var c counter
	res, err = e.Run(t.Context(), k, "", c.keep("again"))
	require.NoError(t, err)
	assert.True(t, res.Replay(), "done is done: no second run")
	assert.True(t, res.NotKept)
	assert.Empty(t, res.Record.Response)
	assert.Zero(t, c.n.Load())
}

func TestRunResponseRefusedCompletesWithoutResponse(t *testing.T) {
	f := &flaky{Store: newMemory(t)}
	f.complete = func(n int) error {
		if n == 1 {
			return store.ErrInvalid
		}
		return nil
	}
	e := newEngine(t, f)
	k := key(t)
	_, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep(make([]byte, 100)) })
	require.NoError(t, err)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { t.Error("ran twice"); return idem.Keep(nil) })
	require.NoError(t, err)
	assert.True(t, res.NotKept)
}

func TestRunCallerCancelKeepsRenewing(t *testing.T) {
	const lease = 150 * time.Millisecond
	s := newMemory(t)
	var rec recorder
	e := newEngine(t, s, idem.WithLease(lease), idem.WithWait(0), idem.WithTracer(events(rec.observe)))
	k := key(t)
	ctx, cancel := context.WithCancel(t.Context())
	rivalRan := false
	res, err := e.Run(ctx, k, "", func(wctx context.Context) idem.Verdict {
		cancel()
		<-wctx.Done() // the caller's cancellation reaches the work
		// The work goes on for three leases; renewal must not stop.
		time.Sleep(3 * lease) // the real clock is the subject
		_, rerr := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { rivalRan = true; return idem.Keep(nil) })
		require.NoError(t, rerr)
		return idem.Keep([]byte("done"))
	})
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	assert.False(t, rivalRan, "a retry while the work runs must not run it again")
	assert.GreaterOrEqual(t, rec.count(idem.Renewed), 3)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, "done", string(r.Response))
}

func TestRunHeartbeatRenews(t *testing.T) {
	const lease = 150 * time.Millisecond
	var rec recorder
	e := newEngine(t, newMemory(t), idem.WithLease(lease), idem.WithTracer(events(rec.observe)))
	_, err := e.Run(t.Context(), key(t), "", func(ctx context.Context) idem.Verdict {
		time.Sleep(4 * lease) // the real clock is the subject
		require.NoError(t, ctx.Err(), "the lease holds")
		return idem.Keep(nil)
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rec.count(idem.Renewed), 5)
}

func TestRunLeaseLostToAnotherClaim(t *testing.T) {
	s, clock := newManualMemory(t)
	e := newEngine(t, s, idem.WithLease(100*time.Millisecond))
	k := key(t)
	other := store.NewToken()
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		clock.Advance(time.Second) // the lease lapses in the store
		c, err := s.Claim(t.Context(), k, "", other, time.Hour)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		<-ctx.Done() // the next renewal finds the key taken
		assert.ErrorIs(t, context.Cause(ctx), store.ErrLeaseLost)
		return idem.Keep([]byte("mine"))
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	assert.Equal(t, idem.SettleLeaseLost, res.Settle)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, other, r.Token, "the other claim's record is untouched")
	assert.Equal(t, store.StatusInProgress, r.Status)
}

func TestRunRenewalsFailUntilLeaseEnds(t *testing.T) {
	const lease = 80 * time.Millisecond
	f := &flaky{Store: newMemory(t)}
	f.renew = func(int) error { return errBlip }
	e := newEngine(t, f, idem.WithLease(lease))
	start := time.Now()
	_, err := e.Run(t.Context(), key(t), "", func(ctx context.Context) idem.Verdict {
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), store.ErrLeaseLost)
		assert.GreaterOrEqual(t, time.Since(start), lease)
		return idem.Discard("stopped")
	})
	require.NoError(t, err)
}

func TestRunCompleteRetriedThroughBlip(t *testing.T) {
	s := newMemory(t)
	f := &flaky{Store: s}
	f.complete = func(n int) error {
		if n <= 5 {
			return errBlip
		}
		return nil
	}
	e := newEngine(t, f)
	k := key(t)
	var c counter
	res, err := e.Run(t.Context(), k, "", c.keep("paid"))
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	assert.EqualValues(t, 6, f.completes.Load())
	res, err = e.Run(t.Context(), k, "", c.keep("paid twice"))
	require.NoError(t, err)
	assert.Equal(t, "paid", string(res.Record.Response))
	assert.EqualValues(t, 1, c.n.Load())
}

// A real store restart between the work and Complete: miniredis closed and
// started again a second later, then a redis-server killed (-9, its data
// lost) and restarted.
func TestRunCompleteSurvivesStoreRestart(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		testRestart(t, mustRedis(t, c, redis.WithEvictionCheck(false)), mr.Close, func() { require.NoError(t, mr.Restart()) })
	})
	t.Run("redis-server", func(t *testing.T) {
		p := startRedis(t)
		testRestart(t, mustRedis(t, p.client(t), redis.WithEvictionCheck(false)), p.kill, p.start)
	})
}

func testRestart(t *testing.T, s store.Store, stop, start func()) {
	e := newEngine(t, s, idem.WithLease(2*time.Second))
	k := key(t)
	var c counter
	restarted := make(chan struct{})
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		c.n.Add(1)
		stop()
		go func() {
			defer close(restarted)
			time.Sleep(time.Second) // the restart's duration is the subject
			start()
		}()
		return idem.Keep([]byte("paid"))
	})
	<-restarted
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	res, err = e.Run(t.Context(), k, "", c.keep("again"))
	require.NoError(t, err)
	assert.True(t, res.Replay())
	assert.Equal(t, "paid", string(res.Record.Response))
	assert.EqualValues(t, 1, c.n.Load(), "no second run")
}

func TestRunCompleteSurvivesStorePause(t *testing.T) {
	p := startRedis(t)
	s := mustRedis(t, p.client(t), redis.WithEvictionCheck(false))
	e := newEngine(t, s, idem.WithLease(2*time.Second))
	k := key(t)
	var c counter
	resumed := make(chan struct{})
	res, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		c.n.Add(1)
		p.pause()
		go func() {
			defer close(resumed)
			time.Sleep(1500 * time.Millisecond) // the pause's duration is the subject
			p.resume()
		}()
		return idem.Keep([]byte("paid"))
	})
	<-resumed
	require.NoError(t, err)
	assert.Equal(t, idem.SettleCompleted, res.Settle)
	res, err = e.Run(t.Context(), k, "", c.keep("again"))
	require.NoError(t, err)
	assert.True(t, res.Replay())
	assert.EqualValues(t, 1, c.n.Load(), "no second run")
}

func TestRunCompleteGivesUpWhenLeaseEnds(t *testing.T) {
	const lease = 100 * time.Millisecond
	f := &flaky{Store: newMemory(t)}
	f.complete = func(int) error { return errBlip }
	f.renew = func(int) error { return errBlip } // the store is gone for the heartbeat too
	f.claim = func(n int, _ store.Token) error {
		if n > 1 {
			return errBlip
		}
		return nil
	}
	e := newEngine(t, f, idem.WithLease(lease))
	start := time.Now()
	res, err := e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	require.ErrorIs(t, err, idem.ErrNotRecorded)
	require.ErrorIs(t, err, errBlip)
	assert.Equal(t, idem.SettleFailed, res.Settle)
	assert.GreaterOrEqual(t, time.Since(start), lease, "retried for the whole lease")
	assert.Greater(t, f.completes.Load(), int32(3))
}

// TestRunCompleteKeepsFailingWhileRenewing: renewals go through but every
// Complete with the response fails with an error the store does not name (a
// server's packet limit). After settleLeases leases the key is recorded as
// done without the response, so a retry is told so instead of running the
// work again once the key lapses.
func TestRunCompleteKeepsFailingWhileRenewing(t *testing.T) {
	const lease = 150 * time.Millisecond
	f := &flaky{Store: newMemory(t)}
	big := []byte("a response the server will not take")
	f.refuse = func(resp []byte) error {
		if string(resp) == string(big) {
			return errBlip
		}
		return nil
	}
	e := newEngine(t, f, idem.WithLease(lease))
	k := key(t)
	start := time.Now()
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep(big) })
	require.NoError(t, err)
	assert.Equal(t, idem.SettleNotKept, res.Settle)
	assert.GreaterOrEqual(t, time.Since(start), 4*lease, "tried the response for settleLeases leases first")

	var c counter
	res, err = e.Run(t.Context(), k, "", c.keep("again"))
	require.NoError(t, err)
	assert.True(t, res.Replay(), "done is done: no second run")
	assert.True(t, res.NotKept)
	assert.Zero(t, c.n.Load())
}

func TestRunCompleteFencedByAnotherClaim(t *testing.T) {
	s, clock := newManualMemory(t)
	f := &flaky{Store: s}
	k := key(t)
	other := store.NewToken()
	f.complete = func(n int) error {
		if n == 1 {
			// Between the work and the first Complete the lease lapses and
			// another claim takes the key.
			clock.Advance(time.Hour)
			_, err := s.Claim(context.Background(), k, "", other, time.Hour)
			require.NoError(t, err)
		}
		return nil
	}
	e := newEngine(t, f)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep([]byte("late")) })
	require.ErrorIs(t, err, store.ErrLeaseLost)
	assert.Equal(t, idem.SettleLeaseLost, res.Settle)
	r, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, other, r.Token)
	assert.Equal(t, store.StatusInProgress, r.Status)
}

func TestRunSlowClaimNotActedOn(t *testing.T) {
	const lease = 100 * time.Millisecond
	s := newMemory(t)
	f := &flaky{Store: s}
	f.claim = func(n int, _ store.Token) error {
		if n == 1 {
			time.Sleep(lease / 2) // a slow reply is the subject
		}
		return nil
	}
	var rec recorder
	e := newEngine(t, f, idem.WithLease(lease), idem.WithTracer(events(rec.observe)))
	k := key(t)
	_, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { t.Error("work ran on a slow claim"); return idem.Keep(nil) })
	require.ErrorIs(t, err, idem.ErrSlowClaim)
	require.ErrorIs(t, err, idem.ErrUnavailable)
	assert.Equal(t, 1, rec.count(idem.SlowClaim))
	_, err = s.Get(t.Context(), k)
	require.ErrorIs(t, err, store.ErrNotFound, "the slow claim is released")
}

func TestRunClaimFails(t *testing.T) {
	f := &flaky{Store: newMemory(t), claim: func(int, store.Token) error { return errBlip }}
	e := newEngine(t, f)
	_, err := e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) })
	require.ErrorIs(t, err, idem.ErrUnavailable)
	require.ErrorIs(t, err, errBlip)
}

// holdKey claims k for another token until release is closed.
func holdKey(t *testing.T, e *idem.Engine, k string) (release chan struct{}, done chan struct{}) {
	started := make(chan struct{})
	release, done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, err := e.Run(context.Background(), k, "", func(context.Context) idem.Verdict {
			close(started)
			<-release
			return idem.Keep([]byte("first"))
		})
		assert.NoError(t, err)
	}()
	<-started
	return release, done
}

func TestRunInProgress(t *testing.T) {
	e := newEngine(t, newMemory(t), idem.WithWait(0))
	k := key(t)
	release, done := holdKey(t, e, k)
	res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) })
	require.NoError(t, err)
	assert.Equal(t, store.InProgress, res.Outcome)
	assert.False(t, res.Record.LockedUntil.IsZero())
	close(release)
	<-done
}

func TestRunWaitReplays(t *testing.T) {
	var rec recorder
	e := newEngine(t, newMemory(t), idem.WithWait(5*time.Second), idem.WithTracer(events(rec.observe)))
	k := key(t)
	release, done := holdKey(t, e, k)
	var got idem.Result
	waited := make(chan error)
	go func() {
		var err error
		got, err = e.Run(context.Background(), k, "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) })
		waited <- err
	}()
	for rec.count(idem.Waiting) == 0 {
		time.Sleep(time.Millisecond) // until the waiter polls
	}
	close(release)
	require.NoError(t, <-waited)
	<-done
	assert.True(t, got.Replay())
	assert.Equal(t, "first", string(got.Record.Response))
}

func TestRunWaitEndsWithContext(t *testing.T) {
	e := newEngine(t, newMemory(t), idem.WithWait(time.Hour))
	k := key(t)
	release, done := holdKey(t, e, k)
	// 250 ms: long enough for the claim itself to answer on a loaded
	// machine (the deadline must end the wait, not the claim), far shorter
	// than the hour the engine would wait.
	ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := e.Run(ctx, k, "", func(context.Context) idem.Verdict { t.Error("ran"); return idem.Keep(nil) })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, store.InProgress, res.Outcome)
	assert.Less(t, time.Since(start), 2*time.Second)
	close(release)
	<-done
}

func TestRunMismatch(t *testing.T) {
	e := newEngine(t, newMemory(t))
	k := key(t)
	var c counter
	_, err := e.Run(t.Context(), k, "a", c.keep("x"))
	require.NoError(t, err)
	res, err := e.Run(t.Context(), k, "b", c.keep("y"))
	require.NoError(t, err)
	assert.Equal(t, store.Mismatch, res.Outcome)
	assert.EqualValues(t, 1, c.n.Load())

	res, err = e.Run(t.Context(), k, "b", c.keep("y"), idem.WithSameRequest(func(recorded, presented string) bool { return true }))
	require.NoError(t, err)
	assert.True(t, res.Replay(), "WithSameRequest turns an incomparable mismatch into the record's state")
}

func TestRunConcurrentOnce(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, s, idem.WithWait(10*time.Second))
			k := key(t)
			var runs atomic.Int32
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					res, err := e.Run(context.Background(), k, "", func(context.Context) idem.Verdict {
						runs.Add(1)
						time.Sleep(20 * time.Millisecond) // widen the race window
						return idem.Keep([]byte("once"))
					})
					assert.NoError(t, err)
					if res.Outcome != store.Acquired {
						assert.Equal(t, "once", string(res.Record.Response))
					}
				})
			}
			wg.Wait()
			assert.EqualValues(t, 1, runs.Load())
		})
	}
}

func TestObserverSeesEveryOutcome(t *testing.T) {
	var rec recorder
	s := newMemory(t)
	e := newEngine(t, s, idem.WithTracer(events(rec.observe)))
	k := key(t)
	_, _ = e.Run(t.Context(), k, "a", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	_, _ = e.Run(t.Context(), k, "a", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	_, _ = e.Run(t.Context(), k, "b", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	_, _ = e.Run(t.Context(), k+"2", "", func(context.Context) idem.Verdict { return idem.Discard("no") })
	for _, kind := range []idem.EventKind{idem.Acquired, idem.Replayed, idem.Mismatch, idem.Completed, idem.Released, idem.StoreCall} {
		assert.NotZero(t, rec.count(kind), kind.String())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ops := map[string]bool{}
	for _, ev := range rec.ev {
		if ev.Kind == idem.StoreCall {
			ops[ev.Op] = true
			assert.Positive(t, ev.Took)
		}
	}
	assert.Equal(t, map[string]bool{idem.OpClaim: true, idem.OpComplete: true, idem.OpRelease: true}, ops)
}

func TestRunCompleteBoundedWhileRenewing(t *testing.T) {
	const lease = 150 * time.Millisecond
	f := &flaky{Store: newMemory(t), complete: func(int) error { return errBlip }}
	e := newEngine(t, f, idem.WithLease(lease))
	start := time.Now()
	res, err := e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	require.ErrorIs(t, err, idem.ErrNotRecorded)
	assert.Equal(t, idem.SettleFailed, res.Settle)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 4*lease)
	assert.Less(t, took, 40*lease)
	assert.Greater(t, f.renews.Load(), int32(1), "renewals went on while Complete was retried")
}
