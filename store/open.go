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
//	mysql://user@host:3306/db              store/mysql, MySQL or MariaDB
//	nats://host:4222/BUCKET?replicas=3     store/nats (a nested module), a JetStream key-value bucket
//	dynamodb://TABLE?region=eu-west-1      store/dynamodb (a nested module), &endpoint= for a local server
//	spanner://projects/P/instances/I/databases/D  store/spanner (a nested module)
//
// Query parameters set the common options (table=, schema=, prefix=,
// purge_batch=, ... as each backend documents); an unknown parameter, a
// malformed value, or an unknown scheme is an error that matches ErrInvalid
// and opens nothing. Backends that connect to a server do so within ctx and
// fail when it cannot be reached.
//
// No error of Open holds a password: the URL is shown with its user info's
// password and password parameters (password=, sslpassword=, ...) as
// "xxxxx" (RedactURL), and every occurrence of them in a backend's or
// driver's error is replaced (RedactError). A password must be
// percent-encoded (url.UserPassword does it): a URL in which an unescaped
// @ : / ? or # puts part of it outside the user info is refused with an
// error that quotes nothing of the URL.
//
// The Store returned owns its pool or client: call Close(s) when done. A SQL
// store's table is not created by Open: call Migrate(ctx, s), or run the
// backend's Schema in your own migrations.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	secrets := Secrets(u)
	shown := rawURL // as the caller wrote it, unless it holds a password
	if len(secrets) > 0 {
		shown = RedactURL(u)
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
		// Whatever the backend or its driver wrote, no password leaves.
		return nil, RedactError(fmt.Errorf("store: open %s: %w", shown, err), secrets...)
	}
	return s, nil
}

// urlHint is what a malformed URL's error suggests.
const urlHint = "percent-encode @ : / ? # % and spaces in the user name and password (url.UserPassword does it)"

// parseURL parses rawURL, refusing the shapes in which a password with an
// unescaped character ends up outside the user info (in the host, the
// port, the path, the query or a fragment), where it would be shown or sent
// as something else. Its errors quote nothing of rawURL.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL and its inner error may quote a part
		// of it (`invalid port ":<password>" after host`): say only what
		// kind of thing is wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: malformed URL: %s; %s", ErrInvalid, unquote(err.Error()), urlHint)
	}
	if u.Fragment != "" || strings.Contains(rawURL, "#") {
		return nil, fmt.Errorf("%w: malformed URL: it has a fragment (#...), which no store URL takes; %s", ErrInvalid, urlHint)
	}
	if u.User == nil && u.Host != "" {
		if _, rest, ok := strings.Cut(rawURL, "://"); ok && strings.Contains(rest, "@") {
			return nil, fmt.Errorf("%w: malformed URL: an @ outside the user info; %s (and @ in a query value as %%40)", ErrInvalid, urlHint)
		}
	}
	return u, nil
}

// unquote drops every double-quoted part of an error text of net/url.
func unquote(msg string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			b.WriteString(msg)
			break
		}
		b.WriteString(msg[:i])
		j := strings.IndexByte(msg[i+1:], '"')
		if j < 0 {
			break
		}
		msg = msg[i+1+j+1:]
	}
	return strings.Join(strings.Fields(b.String()), " ")
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
	case strings.HasPrefix(s, "dynamodb"):
		return "dynamodb"
	case strings.HasPrefix(s, "spanner"):
		return "spanner"
	case strings.HasPrefix(s, "nats"):
		return "nats"
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

// DriverPrefix marks a query parameter passed through to the server on
// purpose: Driver hands var.NAME=value to the driver as NAME=value (a
// PostgreSQL run-time parameter, a MySQL session variable), for a setting
// the backend does not list among its driver's own parameters.
const DriverPrefix = "var."

// Driver returns the parameters a backend hands to its driver (pgx,
// go-sql-driver/mysql): those named in names, which are the driver's own
// and pass as they are, and every var.NAME=value, which passes as
// NAME=value (see DriverPrefix). It marks them as known; any other
// parameter not yet looked at stays unknown, and Done reports it, so a
// misspelt ?tabel=x is an error before anything connects instead of a
// setting the server refuses (or, for a driver that turns unknown
// parameters into SET statements, runs). NAME must be letters, digits, _
// and . only.
func (p *URLParams) Driver(names ...string) url.Values {
	out := url.Values{}
	for k, vs := range p.q {
		if p.used[k] {
			continue
		}
		if slices.Contains(names, k) {
			p.used[k] = true
			if _, dup := out[k]; dup {
				p.errs = append(p.errs, fmt.Errorf("parameter %q given twice, as %s and as %s%s", k, k, DriverPrefix, k))
				continue
			}
			out[k] = vs
			continue
		}
		name, ok := strings.CutPrefix(k, DriverPrefix)
		if !ok {
			continue
		}
		p.used[k] = true
		if !plainName(name) {
			p.errs = append(p.errs, fmt.Errorf("parameter %q: pass a setting's name after %q: letters, digits, _ and . only", k, DriverPrefix))
			continue
		}
		if _, dup := out[name]; dup {
			p.errs = append(p.errs, fmt.Errorf("parameter %q given twice, as %s and as %s%s", name, name, DriverPrefix, name))
			continue
		}
		out[name] = vs
	}
	return out
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
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
