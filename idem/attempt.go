package idem

import (
	"context"
	"sync"
	"time"
)

// attemptCtx bounds one store call made after the work ran (Complete,
// Release): it carries the values of its parent (a context detached from
// the caller's cancellation) and ends at its deadline, as
// context.WithTimeout would. Its Done channel and timer are made only when
// the store asks for Done: a store that checks Err alone (memory://) costs
// no channel and no timer.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{}
	timer *time.Timer
	err   error
}

func newAttempt(parent context.Context, d time.Duration) *attemptCtx {
	c := new(attemptCtx)
	c.init(parent, time.Now().Add(d))
	return c
}

// init sets up a zero attemptCtx, ending at deadline.
func (c *attemptCtx) init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
}

// Deadline returns the attempt's deadline.
func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Value returns the parent's value for key.
func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

// Done returns a channel closed at the deadline or when the attempt is
// stopped, arming the deadline's timer on the first call.
func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		c.expireLocked()
		if c.err != nil {
			close(c.done)
		} else {
			c.timer = time.AfterFunc(time.Until(c.deadline), c.expire)
		}
	}
	return c.done
}

// expireLocked sets the deadline's error once it has passed, when nobody
// waits on Done (with a Done channel, its timer decides, so that Err stays
// nil until Done is closed).
func (c *attemptCtx) expireLocked() {
	if c.err == nil && (c.done == nil || c.timer == nil) && time.Until(c.deadline) <= 0 { // the monotonic clock alone: half a time.Now
		c.err = context.DeadlineExceeded
	}
}

func (c *attemptCtx) expire() { c.end(context.DeadlineExceeded) }

// Err returns context.DeadlineExceeded after the deadline,
// context.Canceled once stopped, and nil before.
func (c *attemptCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.expireLocked()
	}
	return c.err
}

// stop ends the attempt, as a context.WithTimeout's cancel does.
func (c *attemptCtx) stop() { c.end(context.Canceled) }

func (c *attemptCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}
