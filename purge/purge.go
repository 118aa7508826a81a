package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Defaults of the options.
const (
	// DefaultInterval is the time between two runs.
	DefaultInterval = 5 * time.Minute
	// DefaultJitter is the fraction of the interval by which each wait is
	// moved, at random, earlier or later.
	DefaultJitter = 0.1
)

// Result is what one run did.
type Result struct {
	// Deleted is how many records the run deleted (also when it failed
	// part way: what was deleted stays deleted).
	Deleted int64
	// Err is the run's error, nil when it succeeded.
	Err error
	// Started is when the run began; Took is how long it ran.
	Started time.Time
	Took    time.Duration
}

// Observer receives every run's Result, synchronously, on the job's
// goroutine. It receives the job's context (for trace correlation).
type Observer func(ctx context.Context, r Result)

// Option configures a Job. An invalid value makes New (and Run) fail.
type Option func(*config) error

type config struct {
	interval  time.Duration
	jitter    float64
	timeout   time.Duration
	logger    *slog.Logger
	observers []Observer
	delay     bool
}

// WithInterval sets the time between the start of one run and the next
// (default DefaultInterval). It must be positive.
func WithInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("interval %v is not positive", d)
		}
		c.interval = d
		return nil
	}
}

// WithJitter sets the fraction f (0 ≤ f < 1, default DefaultJitter) of the
// interval by which each wait is moved: a wait lasts a uniformly random
// time in [interval×(1−f), interval×(1+f)]. 0 makes it exact.
func WithJitter(f float64) Option {
	return func(c *config) error {
		if !(f >= 0 && f < 1) {
			return fmt.Errorf("jitter %v is not in [0, 1)", f)
		}
		c.jitter = f
		return nil
	}
}

// WithTimeout bounds each run (default: the interval). A run that reaches it
// stops between batches with context.DeadlineExceeded in its Result; the
// next run goes on where it stopped. It must be positive.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("timeout %v is not positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()). A run that deleted
// records is logged at Info, one that deleted none at Debug, and a failed
// run at Warn with its error.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithObserver adds an Observer of every run (for example otelidem's purge
// counter). Several may be added; they are called in order.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return errors.New("nil observer")
		}
		c.observers = append(c.observers, o)
		return nil
	}
}

// WithDelayedStart makes the first run wait one (jittered) interval, as
// every later run does. By default the first run starts at once.
func WithDelayedStart() Option {
	return func(c *config) error {
		c.delay = true
		return nil
	}
}

// Job purges one store periodically. Make it with New; it is safe to call
// Once from several goroutines, and to call Run once at a time.
//
// What reaches the disk: Purge deletes rows, so the row count falls at once
// (the tests check it on SQLite and PostgreSQL). The space the rows held is
// reused for new records; SQLite returns it to the file system only on
// VACUUM or with PRAGMA auto_vacuum, PostgreSQL on VACUUM FULL (plain
// autovacuum makes it reusable). A store whose key rate is steady therefore
// keeps a steady size.
type Job struct {
	p   store.Purger
	cfg config
}

// New returns a Job that purges p. It fails with an error matching
// store.ErrInvalid when p is nil or an option is invalid.
func New(p store.Purger, opts ...Option) (*Job, error) {
	if p == nil {
		return nil, fmt.Errorf("purge: new: %w: nil purger", store.ErrInvalid)
	}
	j := &Job{p: p, cfg: config{interval: DefaultInterval, jitter: DefaultJitter}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("purge: new: %w: nil option", store.ErrInvalid)
		}
		if err := o(&j.cfg); err != nil {
			return nil, fmt.Errorf("purge: new: %w: %w", store.ErrInvalid, err)
		}
	}
	if j.cfg.timeout == 0 {
		j.cfg.timeout = j.cfg.interval
	}
	if j.cfg.logger == nil {
		j.cfg.logger = slog.Default()
	}
	return j, nil
}

// Run makes a Job with New and runs it until ctx is done. It returns New's
// error, or nil once ctx is done.
func Run(ctx context.Context, p store.Purger, opts ...Option) error {
	j, err := New(p, opts...)
	if err != nil {
		return err
	}
	return j.Run(ctx)
}

// Run purges at once (unless WithDelayedStart), then after every jittered
// interval, until ctx is done; then it returns nil. A run in progress when
// ctx ends is cancelled with it and reported. A failed run is logged and
// observed, and the job goes on: the next run retries.
func (j *Job) Run(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("purge: run: %w: nil context", store.ErrInvalid)
	}
	wait := time.Duration(0)
	if j.cfg.delay {
		wait = j.next()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if ctx.Err() != nil {
			return nil // both were ready: do not start a run that is cancelled already
		}
		j.Once(ctx)
		t.Reset(j.next())
	}
}

// Once runs one purge now, bounded by the job's timeout, logs it, reports it
// to the observers and returns its Result.
func (j *Job) Once(ctx context.Context) Result {
	rctx, cancel := context.WithTimeout(ctx, j.cfg.timeout)
	start := time.Now()
	n, err := j.p.Purge(rctx)
	cancel()
	r := Result{Deleted: n, Err: err, Started: start, Took: time.Since(start)}
	j.report(ctx, r)
	return r
}

func (j *Job) report(ctx context.Context, r Result) {
	attrs := []slog.Attr{slog.Int64("deleted", r.Deleted), slog.Duration("took", r.Took)}
	switch {
	case r.Err != nil:
		j.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "purge: run failed", append(attrs, slog.Any("err", r.Err))...)
	case r.Deleted > 0:
		j.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "purge: deleted expired records", attrs...)
	default:
		j.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "purge: nothing to delete", attrs...)
	}
	for _, o := range j.cfg.observers {
		o(ctx, r)
	}
}

// next returns the wait before the next run: the interval moved by a
// uniformly random fraction in [−jitter, +jitter].
func (j *Job) next() time.Duration {
	return jittered(j.cfg.interval, j.cfg.jitter, rand.Float64())
}

// jittered maps u in [0, 1) to a wait in [d×(1−f), d×(1+f)).
func jittered(d time.Duration, f, u float64) time.Duration {
	w := time.Duration(float64(d) * (1 + f*(2*u-1)))
	return max(w, time.Nanosecond)
}
