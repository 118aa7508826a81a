package dedup

import (
	"errors"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
)

// Defaults for the options.
const (
	// DefaultLease is how long a claim on an id is held before it lapses
	// unless renewed. The heartbeat renews it every lease/2 while fn runs, so
	// it bounds how long a crashed consumer keeps the id, not how long fn may
	// run.
	DefaultLease = 30 * time.Second
	// DefaultRetention is how long a processed id is remembered: 7 days,
	// as long as Kafka's default log retention and more than twice Stripe's
	// 3 days of webhook retries.
	DefaultRetention = 7 * 24 * time.Hour
	// MinLease is the shortest lease New accepts.
	MinLease = idem.MinLease
)

// Option configures a Deduper. An option given an invalid value makes New
// fail; it is never silently replaced.
type Option func(*options) error

type options struct {
	lease     time.Duration
	retention time.Duration
	scope     string
	logger    *slog.Logger
	observers []idem.Observer
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

// WithLease sets how long a claim on an id is held without renewal
// (default DefaultLease, at least MinLease). While fn runs, Process renews
// the lease every lease/2, so a slow fn keeps the id however long it takes;
// the lease matters when the consumer dies mid-fn: a redelivery arriving
// within the lease is reported InFlight, one arriving after it runs fn
// again. Choose it shorter than the broker's redelivery delay (the SQS
// visibility timeout, the JetStream AckWait, the webhook sender's retry
// interval) so the redelivery after a crash finds the lease lapsed, and
// longer than a few round trips to the store, so a slow renewal does not let
// it lapse.
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		o.lease = d // checked once, by idem.New
		return nil
	}
}

// WithRetention sets how long a processed id is remembered (default
// DefaultRetention). A redelivery after the retention runs fn again, so the
// retention must outlive the broker's whole redelivery window, with margin:
// the longest time between the first delivery of a message and its last
// possible redelivery. For example: SQS, the queue's message retention
// period (up to 14 days); Kafka, the topic's retention.ms if consumers may be
// rewound; JetStream, the stream's MaxAge; Stripe webhooks, 3 days of
// retries; GitHub webhooks, as long as someone may press "Redeliver".
func WithRetention(d time.Duration) Option {
	return func(o *options) error {
		o.retention = d // checked once, by idem.New
		return nil
	}
}

// WithScope puts ids in a namespace (a source, topic or sender), so the same
// id from two sources is processed once in each. Ids of different scopes
// never collide, whatever characters they contain. Default: no scope.
func WithScope(scope string) Option {
	return func(o *options) error {
		o.scope = scope
		return nil
	}
}

// WithLogger sets the logger for events the caller cannot see in Process's
// result: failed lease renewals, a lease lost to another delivery, a failed
// release. Ids, the scope and keys are redacted (see WithKeyRedactor).
// Default: discard. It must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("nil logger")
		}
		o.logger = l
		return nil
	}
}

// WithObserver adds an engine observer (see idem.Observer): it receives
// every claim outcome, settle outcome, renewal and store call of Process and
// ProcessTx, the same events httpidem and idem.Do report.
func WithObserver(obs idem.Observer) Option {
	return func(o *options) error {
		if obs == nil {
			return errors.New("nil observer")
		}
		o.observers = append(o.observers, obs)
		return nil
	}
}

// WithKeyRedactor sets how ids, the scope and store keys are written into
// log lines and into the text of returned or logged errors, dedup's and the
// engine's (default keyer.DefaultRedactor(): an HMAC with a secret drawn
// once per process; see idem.WithKeyRedactor). An id is logged under "id"
// as the redactor writes the id, the scope under "scope" as it writes the
// scope, the engine's lines carry the store key under "key".
// keyer.RawKeys() writes them as they are; choose it only where logs are as
// protected as the messages. Events given to WithObserver keep the raw key.
// A nil Redactor makes New fail.
func WithKeyRedactor(r keyer.Redactor) Option {
	return func(o *options) error {
		if r == nil {
			return errors.New("nil key redactor")
		}
		o.redact = r
		return nil
	}
}
