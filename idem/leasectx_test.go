package idem

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

type ctxKey struct{}

func newLeaseCtx(parent context.Context) *leaseCtx {
	return &leaseCtx{parent: parent, attempt: Attempt{Number: 3, Fence: 7}}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestLeaseCtxLazy: a work that never asks for Done makes no cancellable
// context, and still sees one cancelled when the run has ended.
func TestLeaseCtxLazy(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	c := newLeaseCtx(parent)
	if a, ok := AttemptFrom(c); c.Err() != nil || c.Value(ctxKey{}) != "v" || !ok || a.Number != 3 {
		t.Fatalf("live: Err %v, Value %v, Attempt %v %v", c.Err(), c.Value(ctxKey{}), a, ok)
	}
	if d, ok := c.Deadline(); ok {
		t.Fatalf("Deadline = %v, want none (the caller's)", d)
	}
	if c.inner != nil {
		t.Fatal("Err, Value and Deadline made the cancellable context")
	}
	c.end()
	if c.inner != nil {
		t.Fatal("end made the cancellable context")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after end: Err = %v, want context.Canceled", c.Err())
	}
	if !errors.Is(context.Cause(c), context.Canceled) {
		t.Fatalf("after end: Cause = %v, want context.Canceled", context.Cause(c))
	}
	if !isClosed(c.Done()) || c.Value(ctxKey{}) != "v" {
		t.Fatal("after end: Done is not closed, or the values are gone")
	}
}

// TestLeaseCtxDoneThenLost: Done asked first, then the lease lost: Done
// closes, with cause ErrLeaseLost, and so do contexts derived from it.
func TestLeaseCtxDoneThenLost(t *testing.T) {
	c := newLeaseCtx(context.Background())
	done := c.Done()
	child, stop := context.WithCancel(c)
	defer stop()
	if isClosed(done) || c.Err() != nil {
		t.Fatal("closed before anything cancelled it")
	}
	c.cancel(store.ErrLeaseLost)
	if !isClosed(done) || !isClosed(child.Done()) {
		t.Fatal("lease lost: Done, or a derived context's Done, not closed")
	}
	if !errors.Is(context.Cause(c), store.ErrLeaseLost) || !errors.Is(context.Cause(child), store.ErrLeaseLost) {
		t.Fatalf("Cause = %v, derived %v; want ErrLeaseLost", context.Cause(c), context.Cause(child))
	}
	c.end()
	if !errors.Is(context.Cause(c), store.ErrLeaseLost) {
		t.Fatalf("end after the loss changed the cause to %v", context.Cause(c))
	}
}

// TestLeaseCtxLostBeforeDone: the lease lost before anything asked for
// Done: Err and Cause tell at once, and a later Done is closed.
func TestLeaseCtxLostBeforeDone(t *testing.T) {
	c := newLeaseCtx(context.Background())
	c.cancel(store.ErrLeaseLost)
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), store.ErrLeaseLost) || !isClosed(c.Done()) {
		t.Fatalf("Err %v, Cause %v, Done closed %v", c.Err(), context.Cause(c), isClosed(c.Done()))
	}
}

// TestLeaseCtxFollowsCaller: the caller's cancellation reaches the work's
// context whether Done was asked before or after it, with the caller's
// cause, and the caller's deadline is the work's.
func TestLeaseCtxFollowsCaller(t *testing.T) {
	why := errors.New("client left")
	for _, before := range []bool{true, false} {
		parent, cancel := context.WithCancelCause(context.Background())
		c := newLeaseCtx(parent)
		var done <-chan struct{}
		if before {
			done = c.Done()
		}
		cancel(why)
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), why) {
			t.Fatalf("Done asked before: %v: Err %v, Cause %v", before, c.Err(), context.Cause(c))
		}
		if !before {
			done = c.Done()
		}
		if !isClosed(done) {
			t.Fatalf("Done asked before: %v: not closed", before)
		}
	}
	dl := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	if d, ok := newLeaseCtx(parent).Deadline(); !ok || !d.Equal(dl) {
		t.Fatalf("Deadline = %v %v, want the caller's %v", d, ok, dl)
	}
}

// TestLeaseCtxConcurrent: Done, Err, Value and derived contexts from many
// goroutines while the lease is lost and the run ends (run with -race):
// every waiter wakes, with one cause.
func TestLeaseCtxConcurrent(t *testing.T) {
	for range 200 {
		c := newLeaseCtx(context.Background())
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				_ = c.Err()
				_ = c.Value(ctxKey{})
				if i%2 == 0 {
					<-c.Done()
				} else {
					child, stop := context.WithCancel(c)
					<-child.Done()
					stop()
				}
			})
		}
		wg.Go(func() { c.cancel(store.ErrLeaseLost) })
		wg.Go(c.end)
		wg.Wait()
		if cause := context.Cause(c); !errors.Is(cause, store.ErrLeaseLost) && !errors.Is(cause, context.Canceled) {
			t.Fatalf("Cause = %v", cause)
		}
	}
}
