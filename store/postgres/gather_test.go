package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/coalesce"
)

// gatherReq is a request of the gathering tests' batcher: n, or a hold.
type gatherReq struct {
	n    int
	hold *gathering
}

// gatherBench is a batcher that runs no statement, behind a gatherer, and
// counts what it ran: the calls run alone, the holds, and each batch's size.
type gatherBench struct {
	g       gatherer
	b       *coalesce.Batcher[gatherReq, int]
	alone   atomic.Int64
	holds   atomic.Int64
	mu      sync.Mutex
	batches []int
}

func newGatherBench() *gatherBench {
	gb := new(gatherBench)
	one := func(_ context.Context, q gatherReq) (int, error) {
		if q.hold != nil {
			gb.holds.Add(1)
			holdFor(q.hold, true)
			return 0, nil
		}
		gb.alone.Add(1)
		return q.n * 2, nil
	}
	many := func(_ context.Context, calls []*coalesce.Call[gatherReq, int]) {
		calls = withoutHolds(calls, func(q *gatherReq) *gathering { return q.hold })
		gb.mu.Lock()
		gb.batches = append(gb.batches, len(calls))
		gb.mu.Unlock()
		for _, c := range calls {
			c.Set(c.Req.n*2, nil)
		}
	}
	gb.b = coalesce.New(1, 64, one, timed(&gb.g, many))
	return gb
}

func (gb *gatherBench) do(ctx context.Context, n int) (int, error) {
	return do(ctx, &gb.g, gb.b, gatherReq{n: n}, func(g *gathering) gatherReq { return gatherReq{hold: g} })
}

// crowd runs n calls at once and checks each one's result.
func (gb *gatherBench) crowd(t *testing.T, n int) {
	t.Helper()
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			r, err := gb.do(context.Background(), i)
			if err != nil || r != i*2 {
				t.Errorf("call %d: %d, %v; want %d", i, r, err, i*2)
			}
		}()
	}
	start.Done()
	wg.Wait()
}

func (gb *gatherBench) reset() {
	gb.alone.Store(0)
	gb.holds.Store(0)
	gb.mu.Lock()
	gb.batches = nil
	gb.mu.Unlock()
}

// A first caller runs alone and waits for nobody; after a crowd spell, the
// next crowd's first caller holds the slot until the whole crowd has come,
// and all of them go as one batch.
func TestGatherCrowdIsOneBatch(t *testing.T) {
	gb := newGatherBench()
	gb.g.patience = time.Minute // only a full gathering ends it
	r, err := gb.do(context.Background(), 21)
	require.NoError(t, err)
	require.Equal(t, 42, r)
	require.EqualValues(t, 1, gb.alone.Load(), "a lone first caller runs alone")
	require.Zero(t, gb.holds.Load(), "a lone first caller gathers nobody")

	// A spell of 8 at once, however it is batched, then another crowd.
	gb.g.mu.Lock()
	gb.g.last = 8
	gb.g.mu.Unlock()
	// The last caller counts itself just before it queues, so the hold may
	// now and then end before its call is in: most rounds must be exact.
	exact := 0
	for range 20 {
		gb.reset()
		gb.crowd(t, 8)
		require.EqualValues(t, 1, gb.holds.Load(), "one gathering per crowd")
		require.LessOrEqual(t, gb.alone.Load(), int64(1), "more than one call of the crowd ran alone (batches %v)", gb.batches)
		if gb.alone.Load() == 0 && len(gb.batches) == 1 && gb.batches[0] == 8 {
			exact++
		}
	}
	require.GreaterOrEqual(t, exact, 15, "rounds of 20 where the crowd went as one batch")
}

// A lone caller after a crowd waits for company no longer than quiet, and
// the spell of one it makes lets the next caller run alone at once.
func TestGatherLoneCallerAfterCrowd(t *testing.T) {
	gb := newGatherBench()
	gb.g.mu.Lock()
	gb.g.last = 16
	gb.g.mu.Unlock()
	began := time.Now()
	r, err := gb.do(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, 2, r)
	require.EqualValues(t, 1, gb.holds.Load())
	require.Less(t, time.Since(began), time.Second, "a lone caller waited for a crowd that never came")
	gb.reset()
	_, err = gb.do(context.Background(), 2)
	require.NoError(t, err)
	require.Zero(t, gb.holds.Load(), "a caller after a spell of one gathered")
	require.EqualValues(t, 1, gb.alone.Load())
}

// A caller whose context ends while it waits for the gathering to open
// returns the context's error, having run nothing; the others go on.
func TestGatherCancelledWhileGathering(t *testing.T) {
	gb := newGatherBench()
	// The slot is busy (a call held in it), so the hold queues and the
	// gathering stays closed.
	release := make(chan struct{})
	entered := make(chan struct{})
	busy := coalesce.New(1, 64, func(_ context.Context, q gatherReq) (int, error) {
		if q.hold != nil {
			holdFor(q.hold, true)
			return 0, nil
		}
		if q.n == -1 {
			close(entered)
			<-release
		}
		return q.n * 2, nil
	}, func(_ context.Context, calls []*coalesce.Call[gatherReq, int]) {
		calls = withoutHolds(calls, func(q *gatherReq) *gathering { return q.hold })
		for _, c := range calls {
			c.Set(c.Req.n*2, nil)
		}
	})
	gb.b = busy
	gb.g.patience = 10 * time.Millisecond
	go func() { _, _ = busy.Do(context.Background(), gatherReq{n: -1}) }() // not through the gatherer
	<-entered
	gb.g.mu.Lock()
	gb.g.last = 4
	gb.g.mu.Unlock()
	leader := make(chan error, 1)
	go func() {
		_, err := gb.do(context.Background(), 1)
		leader <- err
	}()
	require.Eventually(t, func() bool {
		gb.g.mu.Lock()
		defer gb.g.mu.Unlock()
		return gb.g.cur != nil
	}, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	follower := make(chan error, 1)
	go func() {
		_, err := gb.do(ctx, 2)
		follower <- err
	}()
	cancel()
	require.ErrorIs(t, <-follower, context.Canceled)
	close(release)
	require.NoError(t, <-leader)
}
