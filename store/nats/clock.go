package nats

import (
	"context"
	"sync"
	"time"
)

// clockRefresh is how old the server time bound may grow before a decision
// that depends on it (a takeover, an expiry) refreshes it with a probe.
const clockRefresh = time.Second

// serverClock keeps a lower bound of the NATS servers' time, read from the
// time stamps the stream leader puts on the messages it stores; this
// process's own clock serves only to measure the time elapsed since (with
// Go's monotonic reading, which wall-clock steps do not move).
//
// Each message read gives a bound: its stamp is at most the server's time
// when the reply arrived. A probe, when the bound is older than
// clockRefresh, writes a small message to the bucket and reads its stamp
// back. The bound lags the servers' time by about the round trip, so a
// lapsed lease is taken over, and an expired record treated as absent,
// a round trip late at worst, never early.
type serverClock struct {
	mu    sync.Mutex
	stamp time.Time // a server time stamp ...
	at    time.Time // ... that was in the past at this local instant (with a monotonic reading)

	probeMu sync.Mutex // one probe at a time
	probe   func(ctx context.Context) (time.Time, error)
}

// observe records that stamp was at or before the server's time at the
// local instant at.
func (c *serverClock) observe(stamp, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || stamp.After(c.stamp.Add(at.Sub(c.at))) {
		c.stamp, c.at = stamp, at
	}
}

// bound returns the lower bound now and how old its observation is; ok is
// false before the first observation.
func (c *serverClock) bound() (now time.Time, age time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return time.Time{}, 0, false
	}
	age = time.Since(c.at)
	return c.stamp.Add(age), age, true
}

// now returns a lower bound of the servers' time, probing first when the
// bound is missing or older than clockRefresh.
func (c *serverClock) now(ctx context.Context) (time.Time, error) {
	if t, age, ok := c.bound(); ok && age < clockRefresh {
		return t, nil
	}
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	if t, age, ok := c.bound(); ok && age < clockRefresh {
		return t, nil // another caller probed meanwhile
	}
	stamp, err := c.probe(ctx)
	if err != nil {
		return time.Time{}, err
	}
	c.observe(stamp, time.Now())
	t, _, _ := c.bound()
	return t, nil
}
