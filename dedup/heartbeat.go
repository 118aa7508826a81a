package dedup

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idemkit/idemkit/store"
)

// heartbeat renews a claim's lease every lease/2 while fn runs, with a
// re-entrant Claim (same token, same fingerprint).
type heartbeat struct {
	stop chan struct{}
	done chan struct{}
	// lost is set by the heartbeat goroutine before it closes done, and read
	// only after done is closed.
	lost error
}

// startHeartbeat starts the renewing goroutine. cancel cancels fn's context
// when the lease turns out to be lost. halt must be called on every path.
func (d *Deduper) startHeartbeat(ctx context.Context, id, key string, token store.Token, cancel context.CancelCauseFunc) *heartbeat {
	hb := &heartbeat{stop: make(chan struct{}), done: make(chan struct{})}
	ticks, stopTicker := d.opts.newTicker(d.opts.lease / 2)
	go func() {
		defer close(hb.done)
		defer stopTicker()
		for {
			select {
			case <-hb.stop:
				return
			case <-ctx.Done():
				// fn sees the same cancellation and returns; halt follows.
				return
			case <-ticks:
			}
			c, err := d.s.Claim(ctx, key, fingerprint, token, d.opts.lease)
			switch {
			case err != nil:
				// Try again at the next tick: one failed renewal leaves half a
				// lease of margin. If the lease lapses meanwhile and another
				// delivery claims the id, the next renewal (or Complete) says so.
				d.log(ctx, slog.LevelWarn, "lease renewal failed", id, slog.Any("error", err))
			case c.Outcome == store.Acquired:
				// Renewed (or, if the lease had lapsed unclaimed, taken again).
			default:
				// InProgress or Completed: another delivery claimed the id after
				// the lease lapsed. Mismatch: something else overwrote the key.
				hb.lost = fmt.Errorf("dedup: renew lease %q: the lease lapsed and another delivery took the id (%v): %w",
					id, c.Outcome, store.ErrLeaseLost)
				d.log(ctx, slog.LevelWarn, "lease lost to another delivery; cancelling fn", id,
					slog.String("outcome", c.Outcome.String()))
				cancel(hb.lost)
			}
			if hook := d.opts.onBeat; hook != nil {
				hook(hb.lost != nil, err)
			}
			if hb.lost != nil {
				return
			}
		}
	}()
	return hb
}

// halt stops the heartbeat, waits for its goroutine to end, and returns the
// lost-lease error if a renewal found the id taken by another delivery.
func (hb *heartbeat) halt() error {
	select {
	case <-hb.stop:
	default:
		close(hb.stop)
	}
	<-hb.done
	return hb.lost
}
