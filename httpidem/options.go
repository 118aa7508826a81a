package httpidem

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idemkit/keyer"
)

// Defaults of the options.
const (
	DefaultLease       = 30 * time.Second
	DefaultRetention   = 24 * time.Hour
	DefaultMaxResponse = 1 << 20 // bytes
)

// Option configures the middleware returned by New.
type Option func(*options)

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
	leaseMode   bool
	logger      *slog.Logger
	hook        func(Event)
	now         func() time.Time
}

func defaults() options {
	return options{
		methods:     map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		lease:       DefaultLease,
		retention:   DefaultRetention,
		keep:        DefaultKeep,
		maxResponse: DefaultMaxResponse,
		now:         time.Now,
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
	return func(o *options) {
		o.methods = make(map[string]bool, len(methods))
		for _, m := range methods {
			o.methods[m] = true
		}
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
	return func(o *options) { o.scope = fn }
}

// WithFingerprinter sets how requests are fingerprinted (default
// keyer.NewFingerprinter(): method, path and query, raw body up to 1 MiB).
// Its body limit is the request limit: a longer body is answered 413.
func WithFingerprinter(f *keyer.Fingerprinter) Option {
	return func(o *options) {
		if f != nil {
			o.fp = f
		}
	}
}

// WithLease sets how long a claim holds the key while the handler runs
// (default 30s). In lease mode the middleware renews it every half lease
// while the handler runs, so the lease only needs to outlast a stall of the
// process, not the longest request. It must also outlast the store's round
// trips: in lease mode a claim that takes half the lease or more is released
// and answered 503 without running the handler, since its lease may lapse
// before the response is stored. Non-positive values keep the default.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lease = d
		}
	}
}

// WithRetention sets how long a kept response is replayed (default 24h).
// Non-positive values keep the default.
func WithRetention(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.retention = d
		}
	}
}

// WithWait makes a request that finds its key in progress wait up to d for
// the first request to finish, then replay its response (or run, if the first
// was released), instead of answering 409 at once. The default is 0: no
// wait. The wait ends early, with nothing written, when the client goes
// away.
func WithWait(d time.Duration) Option {
	return func(o *options) { o.wait = max(d, 0) }
}

// WithKeep sets which final statuses are kept for replay (default
// DefaultKeep: all but 5xx and 429). A response that is not kept releases the
// key, so the client's retry runs the handler again; in transactional mode it
// also rolls the transaction back.
func WithKeep(keep func(status int) bool) Option {
	return func(o *options) {
		if keep != nil {
			o.keep = keep
		}
	}
}

// WithMaxResponse sets the largest response body kept, in bytes (default
// 1 MiB). In lease mode a bigger response is still sent to the client but
// not kept: the key is released and a warning logged. In transactional mode a
// bigger response rolls the transaction back and the client gets a 500
// problem instead (sending a success whose transaction did not commit, or
// committing an effect whose response cannot be replayed, would both break
// the promise). Non-positive values keep the default.
func WithMaxResponse(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxResponse = n
		}
	}
}

// WithReplayHeaders keeps only the named response headers for replay (an
// allowlist; with no names, none). Set-Cookie, hop-by-hop headers, Date and
// Content-Length are never kept, even when listed.
func WithReplayHeaders(names ...string) Option {
	return func(o *options) { o.allow = append(make([]string, 0, len(names)), names...) }
}

// WithoutReplayHeaders adds names to the headers that are not kept for
// replay (DefaultNotReplayed, plus those that never are).
func WithoutReplayHeaders(names ...string) Option {
	return func(o *options) { o.deny = append(o.deny, names...) }
}

// WithFailOpen makes the middleware run the handler without idempotency when
// the store fails on the first Claim (it logs the failure and reports a
// StoreError event). The default is to fail closed: 503 problem, handler not
// run, because a retry that runs twice is exactly what the middleware exists
// to prevent. In transactional mode a handler run this way finds no
// transaction in its context.
func WithFailOpen() Option {
	return func(o *options) { o.failOpen = true }
}

// WithOptionalKey lets requests without an Idempotency-Key header through to
// the handler, unprotected, instead of answering 400. A malformed key is
// still a 400.
func WithOptionalKey() Option {
	return func(o *options) { o.optionalKey = true }
}

// WithLeaseMode uses leases even when the store is a store.Transactor: for
// handlers whose effects are outside the database (call a payment provider
// with the same key), where a transaction would not cover them.
func WithLeaseMode() Option {
	return func(o *options) { o.leaseMode = true }
}

// WithLogger sets the logger (default slog.Default()). Store failures,
// responses too large to keep and lost leases are logged at Warn or Error.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithHook calls fn for every Event, synchronously, on the request's
// goroutine (or the lease renewer's). Keep it fast; use it for metrics.
func WithHook(fn func(Event)) Option {
	return func(o *options) { o.hook = fn }
}

// WithClock sets the clock used to turn a lease's end into a Retry-After
// (default time.Now). Tests use it with a store's injectable clock.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}
