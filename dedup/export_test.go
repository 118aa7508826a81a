package dedup

import "time"

// Timer is the heartbeat's timer (a *time.Timer in production).
type Timer = timer

// WithTimer replaces time.AfterFunc for the heartbeat: newTimer gets the
// interval and the renewal function and returns the timer. Tests only.
func WithTimer(newTimer func(d time.Duration, f func()) Timer) Option {
	return func(o *options) { o.newTimer = newTimer }
}

// WithBeatHook calls f after every heartbeat renewal with whether the lease
// was found lost and the store's error. Tests only.
func WithBeatHook(f func(lost bool, err error)) Option {
	return func(o *options) { o.onBeat = f }
}
