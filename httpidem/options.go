package httpidem

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
)

// Defaults of the options.
const (
	DefaultLease       = 30 * time.Second
	DefaultRetention   = 24 * time.Hour
	DefaultMaxResponse = 1 << 20 // bytes
)

// Option configures the middleware returned by New. An option given an
// invalid value makes New fail; it is never silently replaced.
type Option func(*options) error

type options struct {
	methods     map[string]bool
	scope       func(*http.Request) ([]string, error)
	fp          *keyer.Fingerprinter
	lease       time.Duration
	retention   time.Duration
	wait        time.Duration
	keep        func(status int) bool
	maxResponse int
	allow, deny []string
	failOpen    bool
	optionalKey bool
	tx          bool
	logger      *slog.Logger
	hook        func(Event)
	observers   []idem.Observer
	now         func() time.Time
	redact      keyer.Redactor
}

func defaults() options {
	return options{
		methods:     map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		lease:       DefaultLease,
		retention:   DefaultRetention,
		keep:        DefaultKeep,
		maxResponse: DefaultMaxResponse,
		logger:      slog.Default(),
		now:         time.Now,
		redact:      keyer.DefaultRedactor(),
	}
}

// DefaultKeep is the default WithKeep rule: keep every response except 5xx
// and 429 Too Many Requests, which are worth retrying for real.
func DefaultKeep(status int) bool {
	return status < 500 && status != http.StatusTooManyRequests
}

// WithMethods sets the request methods the middleware handles (default POST
// and PATCH). Requests with other methods pass straight to the handler,
// without a key check.
func WithMethods(methods ...string) Option {
	return func(o *options) error {
		if len(methods) == 0 {
			return errors.New("no methods")
		}
		o.methods = make(map[string]bool, len(methods))
		for _, m := range methods {
			if m == "" {
				return errors.New("empty method")
			}
			o.methods[m] = true
		}
		return nil
	}
}

// WithScope sets the function that says who is asking: the authenticated
// tenant, user, or anything else that must separate one client's keys from
// another's. Its parts are composed with the client's key by
// keyer.ScopedKey.
//
// SECURITY: without a scope, keys are global. Two clients that send the same
// key share one record, and the second receives the FIRST client's stored
// response (whatever it contained) if the requests match, or a 422 telling it
// the key was used before. Idempotency keys are chosen by clients and are not
// secrets, so any service with more than one client must scope them by the
// authenticated identity, never by something the client merely asserts.
//
// The function runs after authentication (put the middleware inside your
// auth middleware). An error from it, or a scope longer than
// keyer.MaxScopeLen bytes, is answered 500 without running the handler:
// the scope is the server's own data, so it is a server fault. Return an
// error wrapping ErrUnauthenticated to answer 401 instead.
func WithScope(fn func(r *http.Request) ([]string, error)) Option {
	return func(o *options) error {
		if fn == nil {
			return errors.New("nil scope function")
		}
		o.scope = fn
		return nil
	}
}

// WithFingerprinter sets how requests are fingerprinted (default
// keyer.NewFingerprinter(): method, path and query, raw body up to 1 MiB).
// Its body limit is the request limit: a longer body is answered 413.
func WithFingerprinter(f *keyer.Fingerprinter) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("nil fingerprinter")
		}
		o.fp = f
		return nil
	}
}

// WithLease sets how long a claim holds the key while the handler runs
// (default 30s). In lease mode the middleware renews it every half lease
// while the handler runs, so the lease only needs to outlast a stall of the
// process, not the longest request. It must also outlast the store's round
// trips: in lease mode a claim that takes half the lease or more is released
// and answered 503 without running the handler, since its lease may lapse
// before the response is stored. It must be at least idem.MinLease.
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		o.lease = d // checked once, by idem.New
		return nil
	}
}

// WithRetention sets how long a kept response is replayed (default 24h).
// It must be positive.
func WithRetention(d time.Duration) Option {
	return func(o *options) error {
		o.retention = d // checked once, by idem.New
		return nil
	}
}

// WithWait makes a request that finds its key in progress wait up to d for
// the first request to finish, then replay its response (or run, if the first
// was released), instead of answering 409 at once. The default is 0: no
// wait. The wait ends early, with nothing written, when the client goes
// away. It must not be negative.
func WithWait(d time.Duration) Option {
	return func(o *options) error {
		o.wait = d // checked once, by idem.New
		return nil
	}
}

// WithKeep sets which final statuses are kept for replay (default
// DefaultKeep: all but 5xx and 429). A response that is not kept releases the
// key, so the client's retry runs the handler again; in transactional mode it
// also rolls the transaction back.
func WithKeep(keep func(status int) bool) Option {
	return func(o *options) error {
		if keep == nil {
			return errors.New("nil keep function")
		}
		o.keep = keep
		return nil
	}
}

// WithMaxResponse sets the largest response body kept, in bytes (default
// 1 MiB). In lease mode a bigger response is still sent to the client, and
// the key is recorded as done without it: a retry gets a 410 problem
// (CodeResponseNotKept), never a second run. In transactional mode at most n
// bytes are buffered: past them the handler's context is cancelled, its
// writes fail, the transaction rolls back and the client gets a 500 problem
// (CodeResponseTooLarge), so memory stays bounded whatever the handler
// streams. n must be positive.
func WithMaxResponse(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("max response %d is not positive", n)
		}
		o.maxResponse = n
		return nil
	}
}

// WithReplayHeaders keeps only the named response headers for replay (an
// allowlist; with no names, none). Set-Cookie, hop-by-hop headers, Date and
// Content-Length are never kept, even when listed.
func WithReplayHeaders(names ...string) Option {
	return func(o *options) error {
		o.allow = append(make([]string, 0, len(names)), names...)
		return nil
	}
}

// WithoutReplayHeaders adds names to the headers that are not kept for
// replay (DefaultNotReplayed, plus those that never are).
func WithoutReplayHeaders(names ...string) Option {
	return func(o *options) error {
		o.deny = append(o.deny, names...)
		return nil
	}
}

// WithFailOpen makes the middleware run the handler without idempotency when
// the store fails on the first Claim (it logs the failure and reports a
// StoreError event). The default is to fail closed: 503 problem, handler not
// run, because a retry that runs twice is exactly what the middleware exists
// to prevent. In transactional mode a handler run this way finds no
// transaction in its context.
func WithFailOpen() Option {
	return func(o *options) error {
		o.failOpen = true
		return nil
	}
}

// WithOptionalKey lets requests without an Idempotency-Key header through to
// the handler, unprotected, instead of answering 400. A malformed key is
// still a 400.
func WithOptionalKey() Option {
	return func(o *options) error {
		o.optionalKey = true
		return nil
	}
}

// WithTransactions selects transactional mode: claim, handler and stored
// response in one transaction of the store, which must implement
// store.Transactor (New fails otherwise). The handler finds the transaction
// in its request context (sqlite.TxFrom, postgres.TxFrom) and must make its
// writes through it to gain anything. The default is lease mode, which suits
// every store and effects outside the database; choose transactions only
// for handlers whose effect is a write to the store's own database, and keep
// them short: the transaction is open for the whole handler (on SQLite, the
// database's one write lock).
func WithTransactions() Option {
	return func(o *options) error {
		o.tx = true
		return nil
	}
}

// WithObserver adds an engine observer (see idem.Observer): it receives every
// claim outcome, settle outcome, renewal and store call of the requests, the
// same events dedup and idem.Do report. The request is not in the event;
// use WithHook for HTTP-level events.
func WithObserver(obs idem.Observer) Option {
	return func(o *options) error {
		if obs == nil {
			return errors.New("nil observer")
		}
		o.observers = append(o.observers, obs)
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()). Store failures,
// responses too large to keep and lost leases are logged at Warn or Error,
// with the key redacted (see WithKeyRedactor).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("nil logger")
		}
		o.logger = l
		return nil
	}
}

// WithKeyRedactor sets how store keys are written into the middleware's
// and the engine's log lines and into the errors they log (default
// keyer.DefaultRedactor(): an HMAC with a secret drawn once per process);
// see idem.WithKeyRedactor. keyer.RawKeys() writes keys as they are, tenant
// scope included: choose it only where logs are as protected as the data.
// Events given to WithHook and WithObserver keep the raw key (Event.Key):
// they go to the user's own code. A nil Redactor makes New fail.
func WithKeyRedactor(r keyer.Redactor) Option {
	return func(o *options) error {
		if r == nil {
			return errors.New("nil key redactor")
		}
		o.redact = r
		return nil
	}
}

// WithHook calls fn for every Event, synchronously, on the request's
// goroutine (or the lease renewer's). Keep it fast; use it for metrics.
func WithHook(fn func(Event)) Option {
	return func(o *options) error {
		if fn == nil {
			return errors.New("nil hook")
		}
		o.hook = fn
		return nil
	}
}

// WithClock sets the clock used to turn a lease's end into a Retry-After
// (default time.Now). Tests use it with a store's injectable clock.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("nil clock")
		}
		o.now = now
		return nil
	}
}
