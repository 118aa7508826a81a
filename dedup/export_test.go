package dedup

import "time"

// WithTicker replaces the heartbeat's ticker: newTicker gets the interval
// and returns the tick channel and a stop function. Tests only.
func WithTicker(newTicker func(d time.Duration) (<-chan time.Time, func())) Option {
	return func(o *options) { o.newTicker = newTicker }
}

// WithBeatHook calls f after every heartbeat renewal with whether the lease
// was found lost and the store's error. Tests only.
func WithBeatHook(f func(lost bool, err error)) Option {
	return func(o *options) { o.onBeat = f }
}
