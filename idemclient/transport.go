package idemclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/internal/retry"
	"github.com/idemkit/idemkit/keyer"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader is the response header a server sets to "true" on a
// replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLen is the longest key WithKey and WithKeyFunc may give, in
// characters: keyer.MaxKeyLen, the client-key limit httpidem applies. (It is
// not store.MaxKeyLen, the limit of the store key a server builds from the
// client's key and its own scope.)
const MaxKeyLen = keyer.MaxKeyLen

// Defaults of the options.
const (
	DefaultMaxAttempts   = retry.DefaultMaxAttempts
	DefaultMinBackoff    = retry.DefaultMinBackoff
	DefaultMaxBackoff    = retry.DefaultMaxBackoff
	DefaultMaxRetryAfter = retry.DefaultMaxDelay
)

// Errors returned by the transport, matched with errors.Is.
var (
	// ErrKeyReused: a key given with WithKey was already used by this
	// context for a different request (method, URL or body). Nothing was
	// sent.
	ErrKeyReused = errors.New("idemclient: key reused for a different request")
	// ErrInvalidKey: a key given with WithKey, or made by WithKeyFunc's
	// function, breaks keyer's key rule (keyer.CheckKey: 1 to MaxKeyLen
	// visible ASCII characters, no space anywhere, not "null"), so httpidem
	// would refuse it. Nothing was sent.
	ErrInvalidKey = errors.New("idemclient: invalid idempotency key")

	// ErrInvalid is matched by errors.Is on the error of New and NewClient
	// for a nil option or an invalid value. It is store.ErrInvalid and
	// keyer.ErrInvalid (the same value).
	ErrInvalid = keyer.ErrInvalid
)

// Option configures a Transport. An option returns an error for a value it
// cannot use; New reports it (matching ErrInvalid) and builds nothing.
type Option func(*Transport) error

// WithBase sets the transport that sends each attempt (default
// http.DefaultTransport). A nil transport is an error.
func WithBase(rt http.RoundTripper) Option {
	return func(t *Transport) error {
		if rt == nil {
			return errors.New("WithBase(nil): pass a transport, or leave the option out for http.DefaultTransport")
		}
		t.base = rt
		return nil
	}
}

// WithMaxAttempts bounds the attempts of one call, the first included
// (default 4). 1 disables retries. A value below 1 is an error.
func WithMaxAttempts(n int) Option {
	return func(t *Transport) error {
		if err := retry.CheckAttempts("WithMaxAttempts", n); err != nil {
			return err
		}
		t.policy.MaxAttempts = n
		return nil
	}
}

// WithBackoff sets the backoff between attempts that have no Retry-After:
// attempt n waits a random time between half and all of min·2ⁿ, at most max
// (defaults 100ms and 5s). Values that are not positive, or a max below
// min, are an error.
func WithBackoff(min, max time.Duration) Option {
	return func(t *Transport) error {
		if err := retry.CheckBackoff("WithBackoff", min, max); err != nil {
			return err
		}
		t.policy.MinBackoff, t.policy.MaxBackoff = min, max
		return nil
	}
}

// WithMaxRetryAfter sets the longest Retry-After the transport waits for
// (default 30s); an answer asking for longer is returned to the caller.
// A value that is not positive is an error.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(t *Transport) error {
		if err := retry.CheckDelay("WithMaxRetryAfter", d); err != nil {
			return err
		}
		t.policy.MaxDelay = d
		return nil
	}
}

// WithMethods sets the methods that get an Idempotency-Key (default POST and
// PATCH). Requests with other methods are sent without one (unless they
// carry the header already) and retried only when their method is
// idempotent by definition. Methods are compared as httpidem compares them:
// validated as HTTP tokens and upper-cased (keyer.CanonicalMethod), so
// "post" means POST. WithMethods() with no method sends no keys. A method
// that is not a token ("BAD METHOD", "") is an error.
func WithMethods(methods ...string) Option {
	return func(t *Transport) error {
		set, err := keyer.CanonicalMethods("WithMethods", methods...)
		if err != nil {
			return err
		}
		t.methods = set
		return nil
	}
}

// WithKeyFunc sets how fresh keys are made (default NewKey). The function
// must return a distinct key valid under keyer.CheckKey on every call; a
// call whose key is not valid fails with ErrInvalidKey before anything is
// sent. A nil function is an error.
func WithKeyFunc(fn func() string) Option {
	return func(t *Transport) error {
		if err := retry.CheckFunc("WithKeyFunc", fn == nil, "NewKey"); err != nil {
			return err
		}
		t.newKey = fn
		return nil
	}
}

// Transport is an http.RoundTripper that sends one Idempotency-Key per
// logical call and retries the call with that same key. See the package
// documentation for when it retries. It is safe for concurrent use. Make
// one with New; the zero value behaves as New() does.
type Transport struct {
	base    http.RoundTripper
	policy  retry.Policy // policy.Sleep is replaced by tests
	methods map[string]bool
	newKey  func() string
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport configured by opts. A nil option or an invalid
// value is an error matching ErrInvalid that names the option and what to
// pass instead.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{
		base:    http.DefaultTransport,
		policy:  retry.Default(),
		methods: map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		newKey:  NewKey,
	}
	t.policy.Sleep = retry.Sleep
	if err := invalid.Apply(t, opts); err != nil {
		return nil, fmt.Errorf("idemclient: new: %w", err)
	}
	return t, nil
}

// NewClient returns an *http.Client whose transport is New(opts...), or
// New's error.
func NewClient(opts ...Option) (*http.Client, error) {
	t, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t}, nil
}

// NewKey returns a fresh random key: 128 random bits as a UUID version 4.
func NewKey() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

type ctxKey struct{}

// boundKey is a key given with WithKey, bound to the first request sent
// with it.
type boundKey struct {
	key  string
	once sync.Mutex
	fp   string // "" until the first request
}

// WithKey returns a context whose keyed requests all carry key: use it when
// the key comes from your own data (an order id) or when you retry a whole
// call yourself and want the server to see one operation. The key is bound
// to the first request sent with the context; a different request fails
// with ErrKeyReused. Only requests of keyed methods (WithMethods) carry it.
// A redirect that http.Client follows is a new request to the transport: a
// 307 or 308 to another URL fails with ErrKeyReused rather than send the key
// to another operation.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &boundKey{key: key})
}

// Replayed reports whether resp is a server's replay of an earlier
// attempt's answer (Idempotent-Replayed: true).
func Replayed(resp *http.Response) bool {
	return resp != nil && strings.EqualFold(strings.TrimSpace(resp.Header.Get(ReplayedHeader)), "true")
}

// KeyOf returns the Idempotency-Key the request behind resp was sent with,
// or "" when it had none.
func KeyOf(resp *http.Response) string {
	if resp == nil || resp.Request == nil {
		return ""
	}
	v := strings.TrimSpace(resp.Request.Header.Get(Header))
	if s, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
		return s
	}
	return v
}

// quote formats key as a Structured Field string, the draft's syntax.
func quote(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// validKey applies keyer's key rule, the one httpidem applies.
func validKey(key string) error {
	if err := keyer.CheckKey(key); err != nil {
		var ke *keyer.KeyError
		if errors.As(err, &ke) {
			return fmt.Errorf("%w: %s", ErrInvalidKey, ke.Detail)
		}
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}

// idempotentMethods may be retried without a key (RFC 9110 §9.2.2).
var idempotentMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodTrace: true, http.MethodPut: true, http.MethodDelete: true,
}

// defaultTransport is what a zero Transport uses.
var defaultTransport = sync.OnceValue(func() *Transport {
	t, err := New()
	if err != nil {
		panic(err) // New without options cannot fail
	}
	return t
})

// RoundTrip sends req, with its key, and retries it as the package
// documentation says. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.policy.Sleep == nil { // not made by New
		t = defaultTransport()
	}
	ctx := req.Context()
	// Compared in upper case, as httpidem compares them (keyer.CanonicalMethod):
	// a request sent as "post" is a POST to both.
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = http.MethodGet
	}
	header := ""
	if _, ok := req.Header[Header]; !ok && t.methods[method] {
		key := ""
		if bk, ok := ctx.Value(ctxKey{}).(*boundKey); ok {
			if err := t.bind(bk, req, method); err != nil {
				closeBody(req)
				return nil, err
			}
			key = bk.key
		} else {
			key = t.newKey()
			if err := validKey(key); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		header = quote(key)
	}
	keyed := header != "" || req.Header.Get(Header) != ""
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	again := rewindable && (keyed || idempotentMethods[method])

	var (
		resp    *http.Response
		lastErr error // of the last attempt's RoundTrip
		fatal   error // ends the call as it is
	)
	tried, err := t.policy.Loop(ctx, again, func(n int, last bool) (time.Duration, bool) {
		r := req.Clone(ctx)
		if header != "" {
			r.Header.Set(Header, header)
		}
		if n > 0 && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				fatal = fmt.Errorf("idemclient: rewind the request body: %w", err)
				return 0, false
			}
			r.Body = body
		}
		var err error
		resp, err = t.base.RoundTrip(r)
		if err != nil {
			resp, lastErr = nil, err
			if last || ctx.Err() != nil {
				return 0, false
			}
			return t.policy.Backoff(n), true
		}
		lastErr = nil
		wait, again := t.retryable(resp, keyed, n)
		if !again || last {
			return 0, false
		}
		drain(resp)
		resp = nil
		return wait, true
	})
	switch {
	case fatal != nil:
		return nil, fatal
	case err != nil:
		return nil, fmt.Errorf("idemclient: %w", err)
	case resp != nil:
		return resp, nil
	case tried > 1:
		return nil, fmt.Errorf("idemclient: %s: gave up after %d attempts: %w", method, tried, lastErr)
	}
	return nil, lastErr
}

// bind ties bk to req's fingerprint, or checks req against it.
func (t *Transport) bind(bk *boundKey, req *http.Request, method string) error {
	if err := validKey(bk.key); err != nil {
		return err
	}
	fp, err := fingerprint(req, method)
	if err != nil {
		return err
	}
	bk.once.Lock()
	defer bk.once.Unlock()
	if bk.fp == "" {
		bk.fp = fp
		return nil
	}
	if bk.fp != fp {
		return fmt.Errorf("%w: key %q was sent with another request; use a new key for a new request", ErrKeyReused, bk.key)
	}
	return nil
}

// fingerprint identifies a request by method, URL and body digest. A body
// that cannot be rewound is not read (that would consume it): such requests
// are told apart by method and URL only.
func fingerprint(req *http.Request, method string) (string, error) {
	h := sha256.New()
	io.WriteString(h, method+" "+req.URL.String()+"\n")
	if req.Body != nil && req.Body != http.NoBody && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return "", fmt.Errorf("idemclient: read the request body: %w", err)
		}
		_, err = io.Copy(h, body)
		body.Close()
		if err != nil {
			return "", fmt.Errorf("idemclient: read the request body: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// retryable says whether resp is worth another attempt, and after how long.
func (t *Transport) retryable(resp *http.Response, keyed bool, n int) (time.Duration, bool) {
	ra, hasRA := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch resp.StatusCode {
	case http.StatusConflict:
		// Only the in-flight answer carries Retry-After; any other 409 is
		// the application's and final.
		if !keyed || !hasRA {
			return 0, false
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		hasRA = false
	default:
		return 0, false
	}
	return t.policy.Wait(n, hasRA, ra)
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, 1<<30)) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// drain reads a little of a response that will not be returned, so its
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
