package idem

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// Defaults of the options.
const (
	// DefaultLease is how long a claim holds a key before it lapses unless
	// renewed. The engine renews it every lease/2 while the work runs, so it
	// bounds how long a crashed process keeps the key, not how long the work
	// may take.
	DefaultLease = 30 * time.Second
	// DefaultRetention is how long a completed key is remembered.
	DefaultRetention = 24 * time.Hour
	// MinLease is the shortest lease New accepts.
	MinLease = time.Millisecond
)

// Option configures an Engine. An option given an invalid value makes New
// fail; it is never silently replaced by a default.
type Option func(*options) error

type options struct {
	lease     time.Duration
	retention time.Duration
	wait      time.Duration
	tx        bool
	logger    *slog.Logger
	observers []Observer
	same      func(recorded, presented string) bool
	redact    keyer.Redactor
}

func defaults() options {
	return options{
		lease:     DefaultLease,
		retention: DefaultRetention,
		logger:    slog.New(slog.DiscardHandler),
		redact:    keyer.DefaultRedactor(),
	}
}

// WithLease sets how long a claim holds the key without renewal (default
// DefaultLease, at least MinLease). While the work runs and while its result
// is being recorded, the engine renews the lease every lease/2. It must
// outlast a few round trips to the store: a claim whose reply comes after
// half the lease is not acted on (see ErrSlowClaim).
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if d < MinLease {
			return fmt.Errorf("lease %v is shorter than %v", d, MinLease)
		}
		o.lease = d
		return nil
	}
}

// WithRetention sets how long a completed key is remembered and its
// response replayed (default DefaultRetention). It must be positive.
func WithRetention(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("retention %v is not positive", d)
		}
		o.retention = d
		return nil
	}
}

// WithWait makes a call that finds its key in progress poll for up to d
// (with bounded backoff, 5 ms doubling to 100 ms) for the other call to
// finish, then replay its result, or run the work itself if the other call
// released the key. The default, 0, reports InProgress at once. The wait
// ends early when the caller's context ends. d must not be negative.
func WithWait(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("wait %v is negative", d)
		}
		o.wait = d
		return nil
	}
}

// WithTransactions runs claim, work and Complete in one transaction of the
// store, which must implement store.Transactor (New fails otherwise). The
// work's context carries the transaction (sqlite.TxFrom, postgres.TxFrom),
// and everything it writes through it commits with the key and the stored
// response, or rolls back with them. Choose it only when the work's effect
// is a write to that same database: the transaction is held open for the
// whole work (on SQLite, the database's one write lock).
func WithTransactions() Option {
	return func(o *options) error {
		o.tx = true
		return nil
	}
}

// WithLogger sets the logger for what the caller cannot see in a result:
// failed renewals, retried completions, lost leases (default: discard).
// Lines carry the key redacted, under "key" (see WithKeyRedactor).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("nil logger")
		}
		o.logger = l
		return nil
	}
}

// WithObserver adds an Observer that receives every Event of the engine.
// Several observers may be added; they are called in order.
func WithObserver(obs Observer) Option {
	return func(o *options) error {
		if obs == nil {
			return fmt.Errorf("nil observer")
		}
		o.observers = append(o.observers, obs)
		return nil
	}
}

// WithSameRequest sets a function that decides whether a claim reported as
// store.Mismatch is nevertheless the same request: same(recorded, presented)
// gets the record's fingerprint and the call's. It is for fingerprints that
// cannot be compared (two versions of a fingerprint algorithm); such a claim
// is then taken as what the record's state says (Completed or InProgress).
// Default: a mismatch is a mismatch.
func WithSameRequest(same func(recorded, presented string) bool) Option {
	return func(o *options) error {
		if same == nil {
			return fmt.Errorf("nil function")
		}
		o.same = same
		return nil
	}
}

// checkStore is shared by New and its callers.
func checkStore(s store.Store) error {
	if s == nil {
		return fmt.Errorf("%w: nil store", store.ErrInvalid)
	}
	return nil
}
