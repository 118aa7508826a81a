// Package retry is the client retry loop that idemclient and
// contrib/grpcidem's client interceptor share: how many attempts, the
// backoff between them, how long a server-given delay (Retry-After,
// RetryInfo) may be, and the loop that sleeps between attempts. Each client
// keeps what is its own: which answers are worth another attempt, and what it
// sends. It imports the standard library only.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults both clients document.
const (
	DefaultMaxAttempts = 4
	DefaultMinBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
	DefaultMaxDelay    = 30 * time.Second
)

// Policy says how a client retries one call. The zero value is not usable:
// start from Default.
type Policy struct {
	// MaxAttempts bounds the attempts of one call, the first included.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait after attempt n when the
	// server gave no delay: a random time between half and all of
	// MinBackoff·2ⁿ, at most MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxDelay is the longest server-given delay the client waits for; an
	// answer asking for longer ends the call with that answer.
	MaxDelay time.Duration
	// Sleep waits d or until ctx is done (tests replace it); nil waits on a
	// timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Default returns the policy of the documented defaults.
func Default() Policy {
	return Policy{MaxAttempts: DefaultMaxAttempts, MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff, MaxDelay: DefaultMaxDelay}
}

// CheckAttempts returns the error of an option opt(n) for n below 1.
func CheckAttempts(opt string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s(%d): pass 1 or more (1 sends once and never retries)", opt, n)
	}
	return nil
}

// CheckBackoff returns the error of an option opt(lo, hi) whose bounds are
// not positive or out of order.
func CheckBackoff(opt string, lo, hi time.Duration) error {
	if lo <= 0 || hi <= 0 || hi < lo {
		return fmt.Errorf("%s(%v, %v): pass two positive durations, the first no larger than the second", opt, lo, hi)
	}
	return nil
}

// CheckDelay returns the error of an option opt(d) for a d that is not
// positive.
func CheckDelay(opt string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s(%v): pass a positive duration", opt, d)
	}
	return nil
}

// CheckFunc returns the error of an option opt(nil) that takes a function.
func CheckFunc(opt string, isNil bool, instead string) error {
	if isNil {
		return errors.New(opt + "(nil): pass a function, or leave the option out for " + instead)
	}
	return nil
}

// Backoff returns the wait after attempt n (0-based) when the server gave
// no delay.
func (p Policy) Backoff(n int) time.Duration {
	d := p.MaxBackoff
	if n < 30 {
		d = min(p.MinBackoff<<n, p.MaxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// Wait returns how long to wait after attempt n failed in a way worth
// another attempt. told says whether the server gave delay: then the wait
// is that delay with a little jitter (so clients told the same second do
// not all return at once), and false when it is longer than MaxDelay;
// otherwise it is the backoff.
func (p Policy) Wait(n int, told bool, delay time.Duration) (time.Duration, bool) {
	if !told {
		return p.Backoff(n), true
	}
	if delay > p.MaxDelay {
		return 0, false
	}
	delay = max(delay, 0)
	return delay + rand.N(delay/10+time.Millisecond), true
}

// Loop calls attempt for n = 0, 1, ... with last set on the final attempt
// MaxAttempts allows (or on the first, when retry is false), until attempt
// returns again == false; between attempts it sleeps the wait attempt
// returned. It returns the number of attempts made, and an error wrapping
// ctx's cause when ctx ended during a wait.
func (p Policy) Loop(ctx context.Context, retry bool, attempt func(n int, last bool) (wait time.Duration, again bool)) (int, error) {
	max := p.MaxAttempts
	if !retry {
		max = 1
	}
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for n := 0; ; n++ {
		wait, again := attempt(n, n+1 >= max)
		if !again || n+1 >= max {
			return n + 1, nil
		}
		if sleep(ctx, wait) != nil {
			return n + 1, fmt.Errorf("waiting to retry: %w", context.Cause(ctx))
		}
	}
}

// Sleep waits d, or until ctx is done and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
