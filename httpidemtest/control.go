package httpidemtest

import (
	"context"
	"net/http"
	"sync"
)

// Control gives an in-process endpoint the Hold and Fail a Target can use:
// call Enter where the handler is about to take effect, and pass
// Control.Hold and Control.Fail in the Target. The zero Control is ready and
// lets every request through.
//
//	var ctl httpidemtest.Control
//	handler := func(w http.ResponseWriter, r *http.Request) {
//		if status := ctl.Enter(r.Context()); status != 0 {
//			http.Error(w, "failing on purpose", status)
//			return
//		}
//		w.WriteHeader(http.StatusCreated) // take effect, answer
//	}
//	_ = handler
type Control struct {
	mu      sync.Mutex
	held    chan struct{} // closed on release; nil when not held
	entered chan struct{}
	fail    int
}

// Hold makes every request that reaches Enter block until release is
// called; entered receives once for each (up to 64 unread).
func (c *Control) Hold() (entered <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held, in := make(chan struct{}), make(chan struct{}, 64)
	c.held, c.entered = held, in
	return in, sync.OnceFunc(func() {
		c.mu.Lock()
		if c.held == held {
			c.held, c.entered = nil, nil
		}
		c.mu.Unlock()
		close(held)
	})
}

// Fail makes Enter return status until undo is called.
func (c *Control) Fail(status int) (undo func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = status
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.fail = 0
	})
}

// Enter returns 0 when the handler may take effect, after waiting while the
// endpoint is held; or the status to answer without taking effect: the one
// Fail set, or 503 when ctx ends while held.
func (c *Control) Enter(ctx context.Context) int {
	c.mu.Lock()
	held, in, fail := c.held, c.entered, c.fail
	c.mu.Unlock()
	if fail != 0 {
		return fail
	}
	if held == nil {
		return 0
	}
	select {
	case in <- struct{}{}:
	default:
	}
	select {
	case <-held:
		return 0
	case <-ctx.Done():
		return http.StatusServiceUnavailable
	}
}
