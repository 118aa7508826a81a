package postgres

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/internal/coalesce"
)

// Gathering: a caller who finds its batcher idle runs alone (see
// internal/coalesce), and the callers who arrive while its statement runs
// go as one batch after it. When callers come in crowds (a round of
// requests all at once, then a pause), that is two commits in a row where
// one would do, and on a server that flushes its WAL for every commit, a
// commit that arrives while a flush is under way waits for the next one: the
// lone caller's commit and the batch's cost two flushes, and the lone
// caller's next statement (its Complete) lands in yet another one. So when
// the last spell of calls of a kind (from the batcher being idle to idle
// again) had two callers or more at once, a caller who finds it idle waits
// a moment for the others: it holds the batcher's slot with a call that
// runs no statement, its own call and those that arrive meanwhile queue
// behind that hold, and the hold ends as soon as as many callers as in the
// last spell are there, or none joined for quiet (50µs), or after a quarter
// of the last batch's duration (20µs to 1ms). They then go as one batch.
// A lone caller after a crowd waits quiet once; its spell of one then
// sets the next caller running alone at once. With one caller at a time nothing waits, and
// under steady load (the batcher never idle) nothing changes either.

// gathering is one caller's wait for company.
type gathering struct {
	g      *gatherer
	wait   time.Duration // the longest it waits
	want   int           // callers to wait for, the first one included
	held   chan struct{} // closed once the hold has the batcher's slot
	full   chan struct{} // closed once want callers are there
	came   atomic.Int64  // callers past held, about to queue (full at want)
	opened sync.Once
}

// open lets the gathered callers on to the batcher, behind the hold.
func (g *gathering) open() { g.opened.Do(func() { close(g.held) }) }

// gatherer tracks one batcher's spells and their gatherings.
type gatherer struct {
	mu   sync.Mutex
	in   int        // callers in do
	peak int        // the most callers in do at once in this spell
	last int        // peak of the last spell
	cur  *gathering // the gathering under way, if any
	took atomic.Int64
	// patience, when set (by tests), replaces both quiet and the longest
	// wait.
	patience time.Duration
}

// Bounds of a gathering's wait, whatever the batches' duration.
const (
	minGather = 20 * time.Microsecond
	maxGather = time.Millisecond
	// quiet ends a gathering that no caller joined for that long.
	quiet = 50 * time.Microsecond
)

// timed returns many, noting how long each batch took, from which a
// gathering's longest wait is derived (a quarter of it).
func timed[Q, R any](g *gatherer, many func(context.Context, []*coalesce.Call[Q, R])) func(context.Context, []*coalesce.Call[Q, R]) {
	return func(ctx context.Context, calls []*coalesce.Call[Q, R]) {
		t := time.Now()
		many(ctx, calls)
		g.took.Store(int64(time.Since(t)))
	}
}

func (g *gatherer) wait() time.Duration {
	if g.patience > 0 {
		return g.patience
	}
	return min(max(time.Duration(g.took.Load())/4, minGather), maxGather)
}

// do runs req on b, first gathering company as described above. hold
// returns a request whose call runs hold (see holdFor) and no statement.
func do[Q, R any](ctx context.Context, g *gatherer, b *coalesce.Batcher[Q, R], req Q, hold func(*gathering) Q) (R, error) {
	g.mu.Lock()
	g.in++
	g.peak = max(g.peak, g.in)
	cur := g.cur
	lead := cur == nil && g.in == 1 && g.last >= 2
	if lead {
		cur = &gathering{g: g, wait: g.wait(), want: g.last, held: make(chan struct{}), full: make(chan struct{})}
		g.cur = cur
	}
	g.mu.Unlock()
	defer g.leave()
	if lead {
		go func() {
			_, _ = b.Do(context.Background(), hold(cur))
		}()
	}
	if cur != nil {
		select {
		case <-cur.held:
		case <-ctx.Done():
			var zero R
			return zero, ctx.Err()
		}
		// Counted only now, next to queuing: the hold ends once the last
		// caller it waits for is about to queue, not still waiting here.
		if cur.came.Add(1) == int64(cur.want) {
			close(cur.full)
		}
	}
	return b.Do(ctx, req)
}

// expire waits until cur is full, or quiet passed with no caller joining
// (fewer came than in the last spell), or w at the latest, and ends it.
func (g *gatherer) expire(cur *gathering, w time.Duration) {
	end := time.Now().Add(w)
	q := quiet
	if g.patience > 0 {
		q = g.patience
	}
	t := time.NewTimer(min(q, w))
	defer t.Stop()
	for seen := int64(1); ; {
		select {
		case <-cur.full:
			// The last caller counted itself before queuing behind the
			// hold: let it (and the others woken) reach the queue.
			for range 4 {
				runtime.Gosched()
			}
		case <-t.C:
			n, left := cur.came.Load(), time.Until(end)
			if n != seen && left > 0 {
				seen = n
				t.Reset(min(q, left))
				continue
			}
		}
		break
	}
	g.mu.Lock()
	if g.cur == cur {
		g.cur = nil
	}
	g.mu.Unlock()
}

// leave counts a caller out, ending the spell when it was the last.
func (g *gatherer) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.in--
	if g.in == 0 {
		g.last, g.peak = g.peak, 0
	}
}

// holdFor runs a hold's call: it opens the gathering (the slot is the
// hold's now, so the gathered calls queue) and keeps the slot until the
// gathering is full or its wait is over. In a batch (a hold that queued
// behind another call), it only opens it.
func holdFor(cur *gathering, alone bool) {
	cur.open()
	if !alone {
		cur.g.expire(cur, 0)
		return
	}
	cur.g.expire(cur, cur.wait)
}
