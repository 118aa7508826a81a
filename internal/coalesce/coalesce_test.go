package coalesce

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type ctxKey struct{}

// double is the work every test batches: the result of req is req*2, alone
// or in a batch.
func double(_ context.Context, req int) (int, error) { return req * 2, nil }

func doubleAll(_ context.Context, calls []*Call[int, int]) {
	for _, c := range calls {
		c.Set(c.Req*2, nil)
	}
}

// gate holds the work of alone calls until opened, and counts them.
type gate struct {
	open    chan struct{}
	entered chan struct{}
}

func newGate() *gate { return &gate{open: make(chan struct{}), entered: make(chan struct{}, 100)} }

func (g *gate) one(ctx context.Context, req int) (int, error) {
	g.entered <- struct{}{}
	<-g.open
	return double(ctx, req)
}

// waitQueued waits until n calls are queued on b.
func waitQueued[Q, R any](t *testing.T, b *Batcher[Q, R], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		q := len(b.queue)
		b.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after 5s, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitIdle waits until b has no slot taken and nothing queued, as it must
// soon after its last caller returned.
func waitIdle[Q, R any](t *testing.T, b *Batcher[Q, R]) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		running, queued := b.running, len(b.queue)
		b.mu.Unlock()
		if running == 0 && queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the last caller: %d slots taken, %d queued", running, queued)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAloneRunsInlineWithTheCallersContext(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
	var got context.Context
	b := New(4, 8, func(ctx context.Context, req int) (int, error) {
		got = ctx
		return req + 1, nil
	}, func(context.Context, []*Call[int, int]) { t.Error("a lone caller was batched") })
	for i := range 100 {
		res, err := b.Do(ctx, i)
		if err != nil || res != i+1 {
			t.Fatalf("Do(%d) = %d, %v; want %d, nil", i, res, err, i+1)
		}
	}
	if got != ctx {
		t.Errorf("the lone call ran with %v, not the caller's context", got)
	}
	if n, _ := b.Stats(); n != 0 {
		t.Errorf("Stats: %d batches from one caller, want 0", n)
	}
	if b.running != 0 {
		t.Errorf("%d slots still taken", b.running) // the lone caller releases before it returns
	}
}

func TestQueuedCallsRunInBatchesWithTheirOwnResults(t *testing.T) {
	g := newGate()
	var sizes []int
	var mu sync.Mutex
	b := New(1, 4, g.one, func(ctx context.Context, calls []*Call[int, int]) {
		mu.Lock()
		sizes = append(sizes, len(calls))
		mu.Unlock()
		doubleAll(ctx, calls)
	})
	ctx := context.Background()
	first := make(chan int)
	go func() {
		res, _ := b.Do(ctx, 1000) // takes the only slot, held by the gate
		first <- res
	}()
	<-g.entered
	const n = 10
	var wg sync.WaitGroup
	results := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.Do(ctx, i)
		}()
	}
	waitQueued(t, b, n)
	close(g.open)
	wg.Wait()
	if res := <-first; res != 2000 {
		t.Errorf("the first call got %d, want 2000", res)
	}
	for i := range n {
		if errs[i] != nil || results[i] != 2*i {
			t.Errorf("call %d: %d, %v; want %d, nil", i, results[i], errs[i], 2*i)
		}
	}
	// Ten queued behind one slot with batches of at most four: 4, 4, 2.
	if fmt.Sprint(sizes) != "[4 4 2]" {
		t.Errorf("batch sizes %v, want [4 4 2]", sizes)
	}
	if batches, calls := b.Stats(); batches != 3 || calls != n {
		t.Errorf("Stats = %d batches, %d calls; want 3, %d", batches, calls, n)
	}
	waitIdle(t, b)
}

func TestCancelledWhileQueuedIsRemoved(t *testing.T) {
	g := newGate()
	var seen []int
	var mu sync.Mutex
	b := New(1, 8, g.one, func(ctx context.Context, calls []*Call[int, int]) {
		mu.Lock()
		for _, c := range calls {
			seen = append(seen, c.Req)
		}
		mu.Unlock()
		doubleAll(ctx, calls)
	})
	go func() { _, _ = b.Do(context.Background(), 0) }()
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error)
	go func() {
		_, err := b.Do(ctx, 7)
		cancelled <- err
	}()
	var wg sync.WaitGroup
	for _, req := range []int{1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := b.Do(context.Background(), req); err != nil || res != 2*req {
				t.Errorf("Do(%d) = %d, %v", req, res, err)
			}
		}()
	}
	waitQueued(t, b, 3)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v, want context.Canceled", err)
	}
	close(g.open)
	wg.Wait()
	for _, r := range seen {
		if r == 7 {
			t.Errorf("the call cancelled while queued was run: batches saw %v", seen)
		}
	}
	if len(seen) != 2 {
		t.Errorf("batches saw %v, want the two live calls", seen)
	}
}

func TestCancelledAfterTakenReturnsPromptly(t *testing.T) {
	release := make(chan struct{})
	taken := make(chan struct{})
	var batchCtx context.Context
	g := newGate()
	b := New(1, 8, g.one, func(ctx context.Context, calls []*Call[int, int]) {
		batchCtx = ctx
		close(taken)
		<-release
		doubleAll(ctx, calls)
	})
	go func() { _, _ = b.Do(context.Background(), 0) }()
	<-g.entered
	ctxA, cancelA := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "a"))
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	errA := make(chan error, 1)
	resB := make(chan int, 1)
	go func() {
		_, err := b.Do(ctxA, 1)
		errA <- err
	}()
	waitQueued(t, b, 1)
	go func() {
		res, _ := b.Do(ctxB, 2)
		resB <- res
	}()
	waitQueued(t, b, 2)
	close(g.open)
	<-taken
	cancelA()
	select {
	case err := <-errA:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after being taken: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller cancelled while its batch ran did not return")
	}
	if batchCtx.Value(ctxKey{}) != "a" {
		t.Errorf("the batch's context lacks its first call's values")
	}
	if err := batchCtx.Err(); err != nil {
		t.Errorf("the batch's context ended (%v) while a member still waits", err)
	}
	close(release)
	if res := <-resB; res != 4 {
		t.Errorf("the member still waiting got %d, want 4", res)
	}
}

func TestJoinedContextEndsWhenEveryMemberHas(t *testing.T) {
	mk := func(ctx context.Context) *Call[int, int] { return &Call[int, int]{ctx: ctx} }
	c1, cancel1 := context.WithCancel(context.Background())
	c2, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	ctx, stop := joined([]*Call[int, int]{mk(c1), mk(c2)})
	defer stop()
	cancel1()
	time.Sleep(10 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("the batch's context ended with one member still live")
	}
	cancel2()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the batch's context did not end after every member's had")
	}

	// A member whose context never ends keeps the batch's alive.
	c3, cancel3 := context.WithCancel(context.Background())
	ctx, stop = joined([]*Call[int, int]{mk(c3), mk(context.Background())})
	cancel3()
	time.Sleep(10 * time.Millisecond)
	if ctx.Err() != nil {
		t.Error("the batch's context ended though a member's never does")
	}
	stop()
	if ctx.Err() == nil {
		t.Error("stop did not end the batch's context")
	}
}

func TestUnsetCallGetsAnError(t *testing.T) {
	g := newGate()
	b := New(1, 8, g.one, func(_ context.Context, calls []*Call[int, int]) {
		calls[0].Set(1, nil) // forgets the others
	})
	go func() { _, _ = b.Do(context.Background(), 0) }()
	<-g.entered
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := b.Do(context.Background(), i+1)
			errs <- err
		}()
	}
	waitQueued(t, b, 2)
	close(g.open)
	var unset int
	for range 2 {
		if err := <-errs; errors.Is(err, errUnset) {
			unset++
		}
	}
	if unset != 1 {
		t.Errorf("%d calls got errUnset, want 1", unset)
	}
}

// TestStress runs many callers, some cancelling, against a batch function
// that checks its own limits, and checks every result.
func TestStress(t *testing.T) {
	const slots, maxBatch = 3, 5
	var running, peak atomic.Int64
	enter := func() {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
	}
	b := New(slots, maxBatch, func(ctx context.Context, req int) (int, error) {
		enter()
		defer running.Add(-1)
		time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
		return double(ctx, req)
	}, func(ctx context.Context, calls []*Call[int, int]) {
		enter()
		defer running.Add(-1)
		if len(calls) < 2 || len(calls) > maxBatch {
			t.Errorf("a batch of %d calls", len(calls))
		}
		time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
		doubleAll(ctx, calls)
	})
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				req := w*1000 + i
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 0 {
					go func() {
						time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
						cancel()
					}()
				}
				res, err := b.Do(ctx, req)
				cancel()
				switch {
				case errors.Is(err, context.Canceled):
				case err != nil || res != 2*req:
					t.Errorf("Do(%d) = %d, %v", req, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > slots {
		t.Errorf("%d runs at once, want at most %d slots", p, slots)
	}
	if n, _ := b.Stats(); n == 0 {
		t.Error("32 callers on 3 slots never made a batch")
	}
	waitIdle(t, b)
}

// BenchmarkAlone measures what a Batcher costs a lone caller, against the
// same call made directly.
func BenchmarkAlone(b *testing.B) {
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		for i := range b.N {
			if _, err := double(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batcher", func(b *testing.B) {
		bt := New(4, 8, double, doubleAll)
		b.ReportAllocs()
		for i := range b.N {
			if _, err := bt.Do(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
}
