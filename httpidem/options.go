package httpidem

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
)

// Option configures the middleware returned by New. A nil Option, or one
// given an invalid value, makes New fail with an error matching
// store.ErrInvalid; a value is never silently replaced.
type Option func(*options) error

// txMode says when the middleware runs in transactional mode.
type txMode uint8

const (
	txNever txMode = iota
	txAlways
	txIfSupported
)

type options struct {
	methods     map[string]bool
	scope       func(*http.Request) ([]string, error)
	fp          *keyer.Fingerprinter
	keep        func(status int) bool
	maxResponse int
	allow, deny []string
	failOpen    bool
	optionalKey bool
	tx          txMode
	now         func() time.Time
}

func defaults() options {
	return options{
		methods:     map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		keep:        DefaultKeep,
		maxResponse: idem.DefaultMaxResponse,
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
// without a key check. Each name must be an HTTP token (RFC 9110); it is
// compared in upper case, as idemclient compares it: WithMethods("post")
// protects POST, and a request whose method is "post" too. A name that is
// not a token ("BAD METHOD", "") makes New fail.
func WithMethods(methods ...string) Option {
	return func(o *options) error {
		if len(methods) == 0 {
			return errors.New("WithMethods(): name at least one method, such as http.MethodPost")
		}
		set, err := keyer.CanonicalMethods("WithMethods", methods...)
		if err != nil {
			return err
		}
		o.methods = set
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
			return errors.New("WithScope(nil): pass the function that returns the caller's tenant or user")
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
			return errors.New("WithFingerprinter(nil): pass a *keyer.Fingerprinter, or leave the option out for the default")
		}
		o.fp = f
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
			return errors.New("WithKeep(nil): pass a function, or leave the option out for DefaultKeep")
		}
		o.keep = keep
		return nil
	}
}

// WithMaxResponse sets the largest response body kept, in bytes (default
// idem.DefaultMaxResponse, 1 MiB; the rule is idem.KeepUpTo's). In lease mode a bigger response is still sent to the client, and
// the key is recorded as done without it: a retry gets a 410 problem
// (CodeResponseNotKept), never a second run. In transactional mode at most n
// bytes are buffered: past them the handler's context is cancelled, its
// writes fail, the transaction rolls back and the client gets a 500 problem
// (CodeResponseTooLarge), so memory stays bounded whatever the handler
// streams. n must be positive.
func WithMaxResponse(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxResponse(%d): the limit must be a positive number of bytes", n)
		}
		o.maxResponse = n
		return nil
	}
}

// WithReplayHeaders keeps only the named response headers for replay (an
// allowlist; with no names, none). Set-Cookie, hop-by-hop headers, Date and
// Content-Length are never kept, even when listed. Each name must be an HTTP
// token ("bad header" makes New fail).
func WithReplayHeaders(names ...string) Option {
	return func(o *options) error {
		if err := checkHeaderNames("WithReplayHeaders", names); err != nil {
			return err
		}
		o.allow = append(make([]string, 0, len(names)), names...)
		return nil
	}
}

// WithoutReplayHeaders adds names to the headers that are not kept for
// replay (DefaultNotReplayed, plus those that never are). Each name must be
// an HTTP token ("" makes New fail), and at least one must be given.
func WithoutReplayHeaders(names ...string) Option {
	return func(o *options) error {
		if len(names) == 0 {
			return errors.New("WithoutReplayHeaders(): name at least one header")
		}
		if err := checkHeaderNames("WithoutReplayHeaders", names); err != nil {
			return err
		}
		o.deny = append(o.deny, names...)
		return nil
	}
}

func checkHeaderNames(opt string, names []string) error {
	for _, n := range names {
		if _, err := keyer.CanonicalHeader(n); err != nil {
			return fmt.Errorf("%s(%q): %w", opt, n, err)
		}
	}
	return nil
}

// WithFailOpen makes the middleware run the handler without idempotency when
// the store fails on the first Claim (it logs the failure; the engine's
// tracer sees the failed claim). The default is to fail closed: 503 problem, handler not
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
// store.Transactor (New fails otherwise; see idem.Engine.CanTransact). The
// handler finds the transaction in its request context (postgres.Querier,
// sqlite.Querier, mysql.Querier, or the backend's TxFrom) and must make its
// writes through it to gain anything. The default is lease mode, which suits
// every store and effects outside the database; choose transactions only
// for handlers whose effect is a write to the store's own database, and keep
// them short: the transaction is open for the whole handler (on SQLite, the
// database's one write lock).
func WithTransactions() Option {
	return func(o *options) error {
		o.tx = txAlways
		return nil
	}
}

// WithTransactionsIfSupported selects transactional mode when the engine's
// store is a store.Transactor, and lease mode otherwise. With the backend's
// Querier in the handler (postgres.Querier(ctx, pool) is the request's
// transaction when there is one, else the pool), one handler runs
// transactionally on postgres:// and in lease mode on memory:// in tests.
func WithTransactionsIfSupported() Option {
	return func(o *options) error {
		o.tx = txIfSupported
		return nil
	}
}

// WithClock sets the clock used to turn a lease's end into a Retry-After
// (default time.Now). Tests use it with a store's injectable clock.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("WithClock(nil): pass a clock such as time.Now")
		}
		o.now = now
		return nil
	}
}
