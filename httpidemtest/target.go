package httpidemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit/keyer"
)

// Target describes the endpoint under test: where it is, how to make a
// request to it, and how to count its effect. Set Handler or URL, Path, Body,
// OtherBody and one of Count or CountPath; everything else is optional, and
// a rule that needs a field left empty is skipped with a message naming it.
//
// The suite counts effects before and after each rule and compares the
// difference, so nothing else may take effect on the endpoint while it runs.
type Target struct {
	// Handler serves the endpoint in-process: the suite serves it on a
	// loopback server of its own for the duration of the run.
	Handler http.Handler
	// URL is the base URL of a running service, as "http://127.0.0.1:3000".
	// Only one of Handler and URL may be set.
	URL string

	// Method is the endpoint's method; POST when empty.
	Method string
	// Path is the endpoint's path, as "/payments".
	Path string
	// Header is sent with every request. Content-Type is
	// application/json unless Header sets it.
	Header http.Header

	// Body returns a valid request body: sent once with a fresh key, it
	// takes effect once and answers with a status below 400.
	Body func() []byte
	// OtherBody returns a valid body that is a different request (the
	// suite sends it with a used key and expects 422).
	OtherBody func() []byte

	// Count returns how many times the effect has taken effect so far.
	Count func(ctx context.Context) (int, error)
	// CountPath, used when Count is nil, is a path on the target (or an
	// absolute URL on the same host) whose GET answers a JSON array with
	// one element per effect.
	CountPath string

	// Hold, when set, holds requests in the endpoint's handler: after it
	// is called, every request that reaches the effect blocks until
	// release is called, and entered receives once for each. The in-flight
	// rules use it to send a duplicate while the first request runs; without
	// it they rely on the endpoint's own latency. Control.Hold is one.
	Hold func() (entered <-chan struct{}, release func())
	// Fail, when set, makes the endpoint answer status without taking
	// effect, until undo is called. The not-kept rules need it.
	// Control.Fail is one.
	Fail func(status int) (undo func())
	// Restart, when set, restarts the server behind the target (a new
	// process, or a new middleware on the same durable store) and returns
	// once it serves again. The restart rule needs it.
	Restart func(ctx context.Context) error

	// MaxBody is the endpoint's request-body limit for idempotent
	// requests, in bytes: a body of MaxBody bytes is served, one byte more
	// is 413. Zero skips the large-body rules.
	MaxBody int
	// Pad returns body grown to exactly n bytes, still a valid request.
	// The default appends spaces, which a JSON body allows.
	Pad func(body []byte, n int) ([]byte, error)
	// MaxKeyLen is the longest key the endpoint accepts; keyer.MaxKeyLen
	// (255) when zero.
	MaxKeyLen int

	// Scopes, when it has two or more entries, are headers that put a
	// request in different scopes (as "Authorization: Bearer alice" and
	// "Authorization: Bearer bob"): the scope rule sends the same key from
	// the first two and expects two effects.
	Scopes []http.Header

	// ReplayHeader is the header that marks a replay, with the value
	// "true"; "Idempotent-Replayed" when empty.
	ReplayHeader string
	// Volatile lists response headers that may differ between the first
	// answer and its replay, besides Date, Set-Cookie, hop-by-hop headers
	// and request ids, which always may.
	Volatile []string
	// MaxRetryAfter is the longest Retry-After a 409 for a duplicate in
	// flight may ask for; 2 seconds when zero.
	MaxRetryAfter time.Duration
	// Concurrency is how many identical requests the concurrency rule
	// sends at once; 8 when zero, at most 64.
	Concurrency int
	// InFlightAfter is how long the in-flight rules wait after sending the
	// first request before sending its duplicate when Hold is nil; 100 ms
	// when zero.
	InFlightAfter time.Duration
	// RequestTimeout bounds each request; 10 seconds when zero.
	RequestTimeout time.Duration
	// MaxRequests, when positive, bounds the requests of one run: a rule
	// that would send more fails.
	MaxRequests int
	// BareKeys sends keys as bare tokens instead of the draft's quoted
	// strings.
	BareKeys bool
}

// target is a validated Target with its defaults applied and its server
// started.
type target struct {
	Target
	base   *url.URL // scheme and host of the endpoint
	path   string
	client *http.Client
	close  func()
	budget int // requests left when MaxRequests is set
}

// prepare checks tg and starts what it needs: a server for a Handler.
func prepare(tg Target) (*target, error) {
	fail := func(format string, args ...any) (*target, error) {
		return nil, fmt.Errorf("httpidemtest: invalid target: "+format, args...)
	}
	switch {
	case tg.Handler == nil && tg.URL == "":
		return fail("set Handler or URL")
	case tg.Handler != nil && tg.URL != "":
		return fail("set only one of Handler and URL")
	case tg.Path == "" || tg.Path[0] != '/':
		return fail("Path %q must start with /", tg.Path)
	case tg.Body == nil || tg.OtherBody == nil:
		return fail("Body and OtherBody are required: a valid request body and a different one")
	case tg.Count == nil && tg.CountPath == "":
		return fail("set Count or CountPath: the suite counts effects")
	case tg.MaxBody < 0, tg.MaxKeyLen < 0, tg.Concurrency < 0, tg.MaxRetryAfter < 0, tg.InFlightAfter < 0,
		tg.RequestTimeout < 0, tg.MaxRequests < 0:
		return fail("MaxBody, MaxKeyLen, Concurrency, MaxRetryAfter, InFlightAfter, RequestTimeout and MaxRequests must not be negative")
	case tg.Concurrency > 64:
		return fail("Concurrency %d is over 64", tg.Concurrency)
	}
	if bytes.Equal(tg.Body(), tg.OtherBody()) {
		return fail("Body and OtherBody return the same bytes; OtherBody must be a different request")
	}
	if tg.Method == "" {
		tg.Method = http.MethodPost
	}
	if tg.MaxKeyLen == 0 {
		tg.MaxKeyLen = keyer.MaxKeyLen
	}
	if tg.ReplayHeader == "" {
		tg.ReplayHeader = "Idempotent-Replayed"
	}
	if tg.MaxRetryAfter == 0 {
		tg.MaxRetryAfter = 2 * time.Second
	}
	if tg.Concurrency == 0 {
		tg.Concurrency = 8
	}
	if tg.InFlightAfter == 0 {
		tg.InFlightAfter = 100 * time.Millisecond
	}
	if tg.RequestTimeout == 0 {
		tg.RequestTimeout = 10 * time.Second
	}
	if tg.Pad == nil {
		tg.Pad = padSpaces
	}
	t := &target{Target: tg, path: tg.Path, budget: tg.MaxRequests, close: func() {}}
	raw := tg.URL
	if tg.Handler != nil {
		srv := httptest.NewServer(tg.Handler)
		raw, t.close = srv.URL, srv.Close
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		t.close()
		return fail("URL %q is not an http:// or https:// URL", raw)
	}
	if u.Path != "" && u.Path != "/" {
		t.close()
		return fail("URL %q has a path; give the base URL and the endpoint's Path", raw)
	}
	t.base = &url.URL{Scheme: u.Scheme, Host: u.Host}
	if tg.Count == nil {
		cu, err := t.resolve(tg.CountPath)
		if err != nil {
			t.close()
			return nil, err
		}
		t.CountPath = cu
	}
	t.client = &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		Timeout:   tg.RequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer to judge, not to follow
		},
	}
	prev := t.close
	t.close = func() { t.client.CloseIdleConnections(); prev() }
	return t, nil
}

// resolve turns a path or an absolute URL into an absolute URL on the
// target's host; any other host is refused, so the suite talks only to the
// target.
func (t *target) resolve(p string) (string, error) {
	u, err := url.Parse(p)
	if err != nil {
		return "", fmt.Errorf("httpidemtest: invalid target: CountPath %q: %w", p, err)
	}
	if u.IsAbs() {
		if u.Scheme != t.base.Scheme || u.Host != t.base.Host {
			return "", fmt.Errorf("httpidemtest: invalid target: CountPath %q is not on %s; the suite talks only to the target", p, t.base)
		}
		return u.String(), nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("httpidemtest: invalid target: CountPath %q must start with / or be a URL on %s", p, t.base)
	}
	return t.base.String() + p, nil
}

// count returns the number of effects so far.
func (t *target) count(ctx context.Context) (int, error) {
	if t.Count != nil {
		return t.Count(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, t.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.CountPath, nil)
	if err != nil {
		return 0, err
	}
	for k, vs := range t.Header {
		if !strings.EqualFold(k, "Content-Type") {
			req.Header[k] = vs
		}
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("count: GET %s: %w", t.CountPath, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("count: GET %s: %w", t.CountPath, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("count: GET %s answered %d: %s", t.CountPath, resp.StatusCode, truncate(b, 200))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return 0, fmt.Errorf("count: GET %s did not answer a JSON array: %w", t.CountPath, err)
	}
	return len(items), nil
}

// errBudget is the failure of a rule that would go over MaxRequests.
var errBudget = errors.New("the run's request budget (MaxRequests) is spent")

// padSpaces appends spaces to body up to n bytes.
func padSpaces(body []byte, n int) ([]byte, error) {
	if len(body) > n {
		return nil, fmt.Errorf("the body is %d bytes, longer than %d", len(body), n)
	}
	return append(bytes.Clone(body), bytes.Repeat([]byte{' '}, n-len(body))...), nil
}
