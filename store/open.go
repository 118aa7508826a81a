package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// An Opener makes a Store from a URL whose scheme it was registered for.
// The Store it returns owns whatever it connected (a pool, a client, a
// file): closing it with Close releases them. An Opener checks every query
// parameter and rejects the ones it does not know, and honours ctx while it
// connects.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a backend available to Open under the URL scheme scheme
// (compared in lower case). Backends call it from an init function, as
// database/sql drivers do, so a program opts into a backend with an import,
// blank or not:
//
//	import _ "github.com/idemkit/idemkit/store/postgres" // postgres://, postgresql://
//
// Register panics when scheme is empty, open is nil, or the scheme is
// already registered: each is a programming error in the backend, found the
// first time the program starts.
func Register(scheme string, open Opener) {
	scheme = strings.ToLower(scheme)
	if scheme == "" || open == nil {
		panic("store: Register: empty scheme or nil Opener")
	}
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("store: Register: scheme " + scheme + " registered twice")
	}
	openers[scheme] = open
}

// Schemes returns the URL schemes registered with Register, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open returns the Store that rawURL describes, from the backend registered
// for its scheme. idemkit's backends register these (import each one you
// use; package store imports none of them):
//
//	memory://                              store/memory (?sweep=1m)
//	sqlite:///var/lib/app/keys.db          store/sqlite, absolute path
//	sqlite://keys.db, sqlite:keys.db       store/sqlite, path relative to the working directory
//	sqlite://:memory:                      store/sqlite, a private in-memory database
//	postgres://user@host:5432/db           store/postgres (also postgresql://), pgx's own parameters too
//	redis://[user:pass@]host:6379/0        store/redis, one server (rediss:// for TLS)
//	redis+cluster://h1:7001,h2:7002/       store/redis, a Redis Cluster (rediss+cluster:// for TLS)
//
// Query parameters set the common options (table=, schema=, prefix=,
// purge_batch=, ... as each backend documents); an unknown parameter, a
// malformed value, or an unknown scheme is an error that matches ErrInvalid
// and opens nothing. Backends that connect to a server do so within ctx and
// fail when it cannot be reached.
//
// The Store returned owns its pool or client: call Close(s) when done. A SQL
// store's table is not created by Open: call Migrate(ctx, s), or run the
// backend's Schema in your own migrations.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, which may hold a password: say only
		// what is wrong with it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store: open: %w: malformed URL: %v", ErrInvalid, err)
	}
	shown := rawURL // as the caller wrote it, unless it holds a password
	if _, hasPassword := u.User.Password(); hasPassword {
		shown = u.Redacted()
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store: open: %w: URL %q has no scheme (registered: %s)", ErrInvalid, shown, strings.Join(Schemes(), ", "))
	}
	openersMu.RLock()
	open := openers[strings.ToLower(u.Scheme)]
	openersMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("store: open: %w: unknown URL scheme %q (registered: %s; import the backend, e.g. _ \"github.com/idemkit/idemkit/store/%s\")",
			ErrInvalid, u.Scheme, strings.Join(Schemes(), ", "), backendHint(u.Scheme))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", shown, err)
	}
	s, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", shown, err)
	}
	return s, nil
}

// backendHint guesses the package of idemkit that serves scheme, for the
// error of an unregistered one.
func backendHint(scheme string) string {
	s := strings.ToLower(scheme)
	switch {
	case strings.HasPrefix(s, "postgres"):
		return "postgres"
	case strings.HasPrefix(s, "redis"):
		return "redis"
	case strings.HasPrefix(s, "sqlite"), strings.HasPrefix(s, "file"):
		return "sqlite"
	case strings.HasPrefix(s, "mysql"):
		return "mysql"
	}
	return "memory"
}

// URLParams holds the query parameters of an Opener's URL and reports the
// ones it never looked at, so each backend rejects unknown parameters the
// same way. Use it in an Opener:
//
//	p := store.NewURLParams(u)
//	table := p.String("table", "idempotency_keys")
//	batch := p.Int("purge_batch", 1000)
//	if err := p.Done(); err != nil {
//		return nil, err // unknown or malformed parameters
//	}
type URLParams struct {
	q    url.Values
	used map[string]bool
	errs []error
}

// NewURLParams returns the query parameters of u.
func NewURLParams(u *url.URL) *URLParams {
	return &URLParams{q: u.Query(), used: map[string]bool{}}
}

// Has reports whether the parameter is present, and marks it as known.
func (p *URLParams) Has(name string) bool {
	p.used[name] = true
	_, ok := p.q[name]
	return ok
}

// String returns the parameter's value, or def when it is absent. Given
// twice, it is an error reported by Done.
func (p *URLParams) String(name, def string) string {
	p.used[name] = true
	vs, ok := p.q[name]
	switch {
	case !ok:
		return def
	case len(vs) > 1:
		p.errs = append(p.errs, fmt.Errorf("parameter %q given %d times", name, len(vs)))
	}
	return vs[0]
}

// Int returns the parameter as a decimal integer, or def when it is absent.
// A malformed value is reported by Done.
func (p *URLParams) Int(name string, def int) int {
	v := p.String(name, "")
	if v == "" && !p.Has(name) {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.Fail(name, v, errors.New("not an integer"))
		return def
	}
	return n
}

// Duration returns the parameter as a time.ParseDuration string ("30s",
// "1m"), or def when it is absent. A malformed value is reported by Done.
func (p *URLParams) Duration(name string, def time.Duration) time.Duration {
	v := p.String(name, "")
	if v == "" && !p.Has(name) {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.Fail(name, v, errors.New("not a duration such as 30s or 1m"))
		return def
	}
	return d
}

// Bool returns the parameter as a strconv.ParseBool string ("true",
// "false", "1", "0"), or def when it is absent. A malformed value is
// reported by Done.
func (p *URLParams) Bool(name string, def bool) bool {
	v := p.String(name, "")
	if v == "" && !p.Has(name) {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.Fail(name, v, errors.New("not true or false"))
		return def
	}
	return b
}

// All returns every value of a parameter that may be repeated.
func (p *URLParams) All(name string) []string {
	p.used[name] = true
	return p.q[name]
}

// Fail records a malformed value of the parameter name, reported by Done.
func (p *URLParams) Fail(name, value string, err error) {
	p.errs = append(p.errs, fmt.Errorf("parameter %s=%q: %w", name, value, err))
}

// Rest returns the parameters not yet looked at, for a driver that parses
// its own (pgx, go-redis), and marks them as known.
func (p *URLParams) Rest() url.Values {
	rest := url.Values{}
	for k, vs := range p.q {
		if !p.used[k] {
			rest[k] = vs
			p.used[k] = true
		}
	}
	return rest
}

// Done returns an error matching ErrInvalid for every malformed value and
// every parameter that was never looked at, or nil.
func (p *URLParams) Done() error {
	var unknown []string
	for k := range p.q {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	errs := p.errs
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("unknown parameter(s) %s", strings.Join(unknown, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
