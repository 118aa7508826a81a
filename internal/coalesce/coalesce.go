// Package coalesce groups concurrent calls into batches, for backends whose
// server does many operations sent together for little more than the cost
// of one (a multi-row statement, a pipeline).
//
// A caller that finds a free slot and nobody queued runs its call at once,
// alone, in its own goroutine and with its own context, exactly as it would
// without a Batcher: one caller pays nothing but a mutex. A caller that finds
// every slot busy, or others already queued, joins the queue; a slot's
// runner takes up to Max queued calls at a time and runs them as one batch,
// until the queue is empty. So with one caller nothing is ever batched, and
// with many the batches grow with the load.
//
// Each call gets its own result. A caller whose context ends while its call
// is queued is removed and gets the context's error, having changed nothing.
// One whose context ends after a runner took its call gets the context's
// error too, like a caller cancelled in the middle of a statement: the call
// may or may not have taken effect. The context a batch runs with carries
// the values of its first call's and ends only when every member's has
// ended, so one member's deadline never cancels the others' work.
package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Call is one caller's request in a batch and, once run, its result.
type Call[Q, R any] struct {
	ctx  context.Context
	Req  Q
	res  R
	err  error
	done chan struct{}
}

// Context returns the caller's context. A batch function may check it to
// skip calls whose caller has gone.
func (c *Call[Q, R]) Context() context.Context { return c.ctx }

// Set records the call's result. The batch function calls it exactly once
// for every call of the batch; a call left unset gets an error.
func (c *Call[Q, R]) Set(res R, err error) { c.res, c.err = res, err }

// Batcher runs calls alone or in batches; see the package documentation.
// Its zero value is not usable: make one with New.
type Batcher[Q, R any] struct {
	one   func(ctx context.Context, req Q) (R, error)
	many  func(ctx context.Context, calls []*Call[Q, R])
	max   int
	slots int

	mu      sync.Mutex
	running int // slots in use
	queue   []*Call[Q, R]
	batches atomic.Int64
	batched atomic.Int64
}

// New returns a Batcher with slots runners at most (at least 1) and batches
// of at most max calls (at least 2). one runs a call alone; many runs a
// batch of two or more and must call Set on each of them. many runs in a
// runner goroutine, one in its caller's.
func New[Q, R any](slots, maxBatch int, one func(ctx context.Context, req Q) (R, error), many func(ctx context.Context, calls []*Call[Q, R])) *Batcher[Q, R] {
	return &Batcher[Q, R]{
		one:   one,
		many:  many,
		max:   max(maxBatch, 2),
		slots: max(slots, 1),
	}
}

// errUnset is the result of a call the batch function did not Set.
var errUnset = errors.New("coalesce: the batch function set no result for the call")

// Do runs req, alone or in a batch, and returns its result.
func (b *Batcher[Q, R]) Do(ctx context.Context, req Q) (R, error) {
	b.mu.Lock()
	if b.running < b.slots && len(b.queue) == 0 {
		b.running++
		b.mu.Unlock()
		return b.alone(ctx, req)
	}
	c := &Call[Q, R]{ctx: ctx, Req: req, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if b.running < b.slots {
		b.running++
		go b.drain()
	}
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	if b.remove(c) {
		var zero R
		return zero, ctx.Err()
	}
	select {
	case <-c.done: // finished as the context ended: the result is known
		return c.res, c.err
	default:
		var zero R
		return zero, ctx.Err()
	}
}

// alone runs one call in the caller's goroutine, then hands the slot to a
// runner if calls queued up meanwhile.
func (b *Batcher[Q, R]) alone(ctx context.Context, req Q) (R, error) {
	defer b.release()
	return b.one(ctx, req)
}

// release gives up a slot, or keeps it for a new runner when calls are
// waiting.
func (b *Batcher[Q, R]) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		go b.drain()
		return
	}
	b.running--
}

// drain runs queued calls, a batch at a time, until the queue is empty, then
// gives up its slot.
func (b *Batcher[Q, R]) drain() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		batch := make([]*Call[Q, R], n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		b.run(batch)
	}
}

// run runs one batch taken from the queue and tells its callers.
func (b *Batcher[Q, R]) run(batch []*Call[Q, R]) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		live = append(live, c)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		c := live[0]
		c.res, c.err = b.one(c.ctx, c.Req)
		return
	}
	ctx, cancel := joined(live)
	defer cancel()
	for _, c := range live {
		c.err = errUnset // Set overwrites it
	}
	b.batches.Add(1)
	b.batched.Add(int64(len(live)))
	b.many(ctx, live)
}

// joined returns a context with the values of the first call's that ends
// when every call's context has ended.
func joined[Q, R any](calls []*Call[Q, R]) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(calls[0].ctx))
	for _, c := range calls {
		if c.ctx.Done() == nil {
			return ctx, cancel // one that never ends: neither does the batch's
		}
	}
	var left atomic.Int64
	left.Store(int64(len(calls)))
	stops := make([]func() bool, 0, len(calls))
	for _, c := range calls {
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// remove takes c out of the queue; false when a runner already took it.
func (b *Batcher[Q, R]) remove(c *Call[Q, R]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == c {
			n := len(b.queue) - 1
			copy(b.queue[i:], b.queue[i+1:])
			b.queue[n] = nil
			b.queue = b.queue[:n]
			return true
		}
	}
	return false
}

// Stats reports how many batches of two or more calls have run and how
// many calls they held in all.
func (b *Batcher[Q, R]) Stats() (batches, calls int64) {
	return b.batches.Load(), b.batched.Load()
}
