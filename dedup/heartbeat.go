package dedup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// timer is the part of *time.Timer the heartbeat uses, so tests can drive it.
type timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

func afterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }

// heartbeat renews a claim's lease every lease/2 while fn runs, with a
// re-entrant Claim (same token, same fingerprint). It is a timer, not a
// goroutine: nothing runs until the first renewal is due, so a fast fn pays
// only for arming and stopping the timer.
type heartbeat struct {
	d        *Deduper
	ctx      context.Context
	id, key  string
	token    store.Token
	cancel   context.CancelCauseFunc
	interval time.Duration

	// mu is held for a whole renewal, so halt waits for one in progress.
	mu      sync.Mutex
	stopped bool
	lost    error
	t       timer
}

// startHeartbeat arms the first renewal. cancel cancels fn's context when
// the lease turns out to be lost. halt must be called on every path.
func (d *Deduper) startHeartbeat(ctx context.Context, id, key string, token store.Token, cancel context.CancelCauseFunc) *heartbeat {
	hb := &heartbeat{d: d, ctx: ctx, id: id, key: key, token: token, cancel: cancel, interval: d.opts.lease / 2}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.t = d.opts.newTimer(hb.interval, hb.beat)
	return hb
}

// beat runs in the timer's goroutine: one renewal, then the next is armed.
func (hb *heartbeat) beat() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped || hb.ctx.Err() != nil {
		// halt came first, or the caller gave up: fn is returning.
		return
	}
	d := hb.d
	// A renewal slower than the interval is of no use, and halt waits for it.
	ctx, cancel := context.WithTimeout(hb.ctx, hb.interval)
	defer cancel()
	c, err := d.s.Claim(ctx, hb.key, fingerprint, hb.token, d.opts.lease)
	switch {
	case err != nil:
		// Try again at the next tick: one failed renewal leaves half a lease
		// of margin. If the lease lapses meanwhile and another delivery
		// claims the id, the next renewal (or Complete) says so.
		d.log(hb.ctx, slog.LevelWarn, "lease renewal failed", hb.id, slog.Any("error", err))
	case c.Outcome == store.Acquired:
		// Renewed (or, if the lease had lapsed unclaimed, taken again).
	default:
		// InProgress or Completed: another delivery claimed the id after the
		// lease lapsed. Mismatch: something else overwrote the key.
		hb.lost = fmt.Errorf("dedup: renew lease %q: the lease lapsed and another delivery took the id (%v): %w",
			hb.id, c.Outcome, store.ErrLeaseLost)
		d.log(hb.ctx, slog.LevelWarn, "lease lost to another delivery; cancelling fn", hb.id,
			slog.String("outcome", c.Outcome.String()))
		hb.cancel(hb.lost)
	}
	if hb.lost == nil {
		hb.t.Reset(hb.interval)
	}
	if hook := d.opts.onBeat; hook != nil {
		hook(hb.lost != nil, err)
	}
}

// halt stops the heartbeat, waiting for a renewal in progress, and returns
// the lost-lease error if a renewal found the id taken by another delivery.
// No renewal starts after halt returns.
func (hb *heartbeat) halt() error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.stopped = true
	hb.t.Stop()
	return hb.lost
}
