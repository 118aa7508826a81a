package idemclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader is the response header a server sets to "true" on a
// replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLen is the longest key WithKey accepts, in bytes (the limit of
// httpidem and of the IETF draft's common practice).
const MaxKeyLen = 255

// Defaults of the options.
const (
	DefaultMaxAttempts   = 4
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
)

// Errors returned by the transport, matched with errors.Is.
var (
	// ErrKeyReused: a key given with WithKey was already used by this
	// context for a different request (method, URL or body). Nothing was
	// sent.
	ErrKeyReused = errors.New("idemclient: key reused for a different request")
	// ErrInvalidKey: a key given with WithKey is empty, longer than
	// MaxKeyLen, or holds a character outside printable ASCII. Nothing was
	// sent.
	ErrInvalidKey = errors.New("idemclient: invalid idempotency key")
)

// Option configures a Transport.
type Option func(*Transport)

// WithBase sets the transport that sends each attempt (default
// http.DefaultTransport).
func WithBase(rt http.RoundTripper) Option {
	return func(t *Transport) {
		if rt != nil {
			t.base = rt
		}
	}
}

// WithMaxAttempts bounds the attempts of one call, the first included
// (default 4). 1 disables retries. Values below 1 keep the default.
func WithMaxAttempts(n int) Option {
	return func(t *Transport) {
		if n >= 1 {
			t.maxAttempts = n
		}
	}
}

// WithBackoff sets the backoff between attempts that have no Retry-After:
// attempt n waits a random time between half and all of min·2ⁿ, at most max
// (defaults 100ms and 5s). Non-positive values keep the defaults.
func WithBackoff(min, max time.Duration) Option {
	return func(t *Transport) {
		if min > 0 {
			t.minBackoff = min
		}
		if max > 0 {
			t.maxBackoff = max
		}
		if t.maxBackoff < t.minBackoff {
			t.maxBackoff = t.minBackoff
		}
	}
}

// WithMaxRetryAfter sets the longest Retry-After the transport waits for
// (default 30s); an answer asking for longer is returned to the caller.
// Non-positive values keep the default.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.maxRetryAfter = d
		}
	}
}

// WithMethods sets the methods that get an Idempotency-Key (default POST and
// PATCH). Requests with other methods are sent without one (unless they
// carry the header already) and retried only when their method is
// idempotent by definition.
func WithMethods(methods ...string) Option {
	return func(t *Transport) {
		t.methods = make(map[string]bool, len(methods))
		for _, m := range methods {
			t.methods[strings.ToUpper(m)] = true
		}
	}
}

// WithKeyFunc sets how fresh keys are made (default NewKey). The function
// must return a distinct, valid key (see WithKey) on every call.
func WithKeyFunc(fn func() string) Option {
	return func(t *Transport) {
		if fn != nil {
			t.newKey = fn
		}
	}
}

// Transport is an http.RoundTripper that sends one Idempotency-Key per
// logical call and retries the call with that same key. See the package
// documentation for when it retries. It is safe for concurrent use. Make
// one with New; the zero value behaves as New() does.
type Transport struct {
	base          http.RoundTripper
	maxAttempts   int
	minBackoff    time.Duration
	maxBackoff    time.Duration
	maxRetryAfter time.Duration
	methods       map[string]bool
	newKey        func() string

	// sleep waits d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport configured by opts.
func New(opts ...Option) *Transport {
	t := &Transport{
		base:          http.DefaultTransport,
		maxAttempts:   DefaultMaxAttempts,
		minBackoff:    DefaultMinBackoff,
		maxBackoff:    DefaultMaxBackoff,
		maxRetryAfter: DefaultMaxRetryAfter,
		methods:       map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		newKey:        NewKey,
		sleep:         sleepCtx,
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// NewClient returns an *http.Client whose transport is New(opts...).
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: New(opts...)}
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

func validKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d, want 1 to %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII", ErrInvalidKey, i)
		}
	}
	return nil
}

// idempotentMethods may be retried without a key (RFC 9110 §9.2.2).
var idempotentMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodTrace: true, http.MethodPut: true, http.MethodDelete: true,
}

// defaultTransport is what a zero Transport uses.
var defaultTransport = sync.OnceValue(func() *Transport { return New() })

// RoundTrip sends req, with its key, and retries it as the package
// documentation says. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.sleep == nil { // not made by New
		t = defaultTransport()
	}
	ctx := req.Context()
	method := req.Method
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
		}
		header = quote(key)
	}
	keyed := header != "" || req.Header.Get(Header) != ""
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	retry := rewindable && (keyed || idempotentMethods[method])
	attempts := t.maxAttempts
	if !retry {
		attempts = 1
	}

	var lastErr error
	tried := 0
	for n := 0; ; n++ {
		tried = n + 1
		r := req.Clone(ctx)
		if header != "" {
			r.Header.Set(Header, header)
		}
		if n > 0 && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("idemclient: rewind the request body: %w", err)
			}
			r.Body = body
		}
		resp, err := t.base.RoundTrip(r)
		last := n+1 >= attempts
		if err != nil {
			lastErr = err
			if last || ctx.Err() != nil {
				break
			}
			if t.sleep(ctx, t.backoff(n)) != nil {
				return nil, fmt.Errorf("idemclient: waiting to retry: %w", context.Cause(ctx))
			}
			continue
		}
		wait, again := t.retryable(resp, keyed, n)
		if !again || last {
			return resp, nil
		}
		drain(resp)
		if t.sleep(ctx, wait) != nil {
			return nil, fmt.Errorf("idemclient: waiting to retry: %w", context.Cause(ctx))
		}
	}
	if tried > 1 {
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
	if !hasRA {
		return t.backoff(n), true
	}
	if ra > t.maxRetryAfter {
		return 0, false
	}
	// A little jitter so clients told the same second do not all return at
	// once.
	return ra + mrand.N(ra/10+time.Millisecond), true
}

// backoff is the wait after attempt n (0-based) failed without a Retry-After.
func (t *Transport) backoff(n int) time.Duration {
	d := t.maxBackoff
	if n < 30 {
		d = min(t.minBackoff<<n, t.maxBackoff)
	}
	return d/2 + mrand.N(d/2+1)
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
