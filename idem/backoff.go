package idem

import "time"

// backoff is the engine's one retry schedule, used by every loop it runs
// (waiting for a key in progress, renewing a lease after a failure,
// retrying Complete and Release): a first delay, doubling up to a cap.
type backoff struct {
	d, max time.Duration
	n      int
}

// Delays of the engine's loops.
const (
	backoffFirst   = 5 * time.Millisecond
	waitMaxBackoff = 100 * time.Millisecond
	// settleMaxBackoff caps the Complete and Release retries (and lease/8).
	settleMaxBackoff = 500 * time.Millisecond
)

func newBackoff(first, limit time.Duration) backoff {
	limit = max(limit, time.Millisecond)
	return backoff{d: max(min(first, limit), time.Millisecond), max: limit}
}

// first reports whether no delay was taken yet.
func (b *backoff) first() bool { return b.n == 0 }

// next returns the delay to wait now and doubles the following one.
func (b *backoff) next() time.Duration {
	d := b.d
	b.n++
	b.d = min(b.d*2, b.max)
	return d
}

// reset starts the schedule again (after a success).
func (b *backoff) reset(first time.Duration) { *b = newBackoff(first, b.max) }
