package grpcidem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of the client options.
const (
	DefaultMaxAttempts   = 4
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultMaxRetryDelay = 30 * time.Second
)

// Errors of the client interceptor, matched with errors.Is. Nothing was sent
// when either is returned.
var (
	// ErrKeyReused: a key given with WithKey was already sent with a
	// different method or request message.
	ErrKeyReused = errors.New("grpcidem: key reused for a different request")
	// ErrInvalidKey: a key given with WithKey is empty, longer than 255
	// bytes, or holds a character outside visible ASCII.
	ErrInvalidKey = errors.New("grpcidem: invalid idempotency key")
)

// ClientOption configures UnaryClientInterceptor.
type ClientOption func(*client)

// WithMaxAttempts bounds the attempts of one call, the first included
// (default 4); 1 disables retries. Values below 1 keep the default.
func WithMaxAttempts(n int) ClientOption {
	return func(c *client) {
		if n >= 1 {
			c.maxAttempts = n
		}
	}
}

// WithBackoff sets the backoff between attempts that have no RetryInfo:
// attempt n waits a random time between half and all of lo·2ⁿ, at most hi
// (defaults 100ms and 5s). Non-positive values keep the defaults.
func WithBackoff(lo, hi time.Duration) ClientOption {
	return func(c *client) {
		if lo > 0 {
			c.minBackoff = lo
		}
		if hi > 0 {
			c.maxBackoff = hi
		}
		c.maxBackoff = max(c.maxBackoff, c.minBackoff)
	}
}

// WithMaxRetryDelay sets the longest RetryInfo delay the client waits for
// (default 30s); a longer one ends the call with the server's status.
func WithMaxRetryDelay(d time.Duration) ClientOption {
	return func(c *client) {
		if d > 0 {
			c.maxRetryDelay = d
		}
	}
}

// WithKeyedMethods sets which methods get a key (default: all). Calls of
// other methods are sent as they are and never retried.
func WithKeyedMethods(fn func(fullMethod string) bool) ClientOption {
	return func(c *client) {
		if fn != nil {
			c.keyed = fn
		}
	}
}

// WithKeyFunc sets how fresh keys are made (default: a random UUID v4).
func WithKeyFunc(fn func() string) ClientOption {
	return func(c *client) {
		if fn != nil {
			c.newKey = fn
		}
	}
}

type client struct {
	maxAttempts   int
	minBackoff    time.Duration
	maxBackoff    time.Duration
	maxRetryDelay time.Duration
	keyed         func(string) bool
	newKey        func() string
	sleep         func(context.Context, time.Duration) error
}

type ctxKey struct{}

type boundKey struct {
	key string
	mu  sync.Mutex
	fp  string
}

// WithKey returns a context whose keyed calls carry key (an order id, or
// the key of a whole operation you retry yourself). The key is bound to the
// first call made with the context; a call of another method or with
// another request message fails with ErrKeyReused, and nothing is sent.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &boundKey{key: key})
}

type replayedOption struct {
	grpc.EmptyCallOption
	p *bool
}

// Replayed is a call option that sets *p to whether the call's answer was
// a replay of an earlier attempt's (the server's "idempotent-replayed"
// metadata). It needs UnaryClientInterceptor on the connection.
func Replayed(p *bool) grpc.CallOption { return replayedOption{p: p} }

// IsReplayed reports whether header or trailer metadata marks a replay.
func IsReplayed(md metadata.MD) bool {
	for _, v := range md.Get(ReplayedKey) {
		if strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}

func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// UnaryClientInterceptor returns an interceptor that sends one idempotency
// key per logical call and retries the call with it, as the package
// documentation says.
func UnaryClientInterceptor(opts ...ClientOption) grpc.UnaryClientInterceptor {
	return newClient(opts...).intercept
}

func newClient(opts ...ClientOption) *client {
	c := &client{
		maxAttempts:   DefaultMaxAttempts,
		minBackoff:    DefaultMinBackoff,
		maxBackoff:    DefaultMaxBackoff,
		maxRetryDelay: DefaultMaxRetryDelay,
		keyed:         func(string) bool { return true },
		newKey:        newKey,
		sleep:         sleepCtx,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

func validKey(key string) error {
	if key == "" || len(key) > 255 {
		return fmt.Errorf("%w: length %d, want 1 to 255", ErrInvalidKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("%w: byte %d is not visible ASCII", ErrInvalidKey, i)
		}
	}
	return nil
}

func (c *client) bind(bk *boundKey, method string, req any) error {
	if err := validKey(bk.key); err != nil {
		return err
	}
	m, ok := req.(proto.Message)
	if !ok {
		return fmt.Errorf("grpcidem: request %T is not a protobuf message", req)
	}
	fp, err := fingerprint(method, m)
	if err != nil {
		return fmt.Errorf("grpcidem: encode the request: %w", err)
	}
	bk.mu.Lock()
	defer bk.mu.Unlock()
	if bk.fp == "" {
		bk.fp = fp
	} else if bk.fp != fp {
		return fmt.Errorf("%w: key %q was sent with another call; use a new key for a new request", ErrKeyReused, bk.key)
	}
	return nil
}

func (c *client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var rp *bool
	for _, o := range opts {
		if r, ok := o.(replayedOption); ok {
			rp = r.p
		}
	}
	out, _ := metadata.FromOutgoingContext(ctx)
	keyed := len(out.Get(MetadataKey)) > 0
	if !keyed && c.keyed(method) {
		key := ""
		if bk, ok := ctx.Value(ctxKey{}).(*boundKey); ok {
			if err := c.bind(bk, method, req); err != nil {
				return err
			}
			key = bk.key
		} else {
			key = c.newKey()
		}
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, key)
		keyed = true
	}
	attempts := 1
	if keyed {
		attempts = c.maxAttempts
	}
	for n := 0; ; n++ {
		var hdr, trl metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
		if rp != nil {
			*rp = IsReplayed(hdr) || IsReplayed(trl)
		}
		if err == nil || n+1 >= attempts || ctx.Err() != nil {
			return err
		}
		wait, again := c.retryable(err, n)
		if !again {
			return err
		}
		if c.sleep(ctx, wait) != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// retryable says whether err is worth another attempt, and after how long.
func (c *client) retryable(err error, n int) (time.Duration, bool) {
	st := status.Convert(err)
	delay, hasDelay := retryDelay(st)
	switch st.Code() {
	case codes.Unavailable:
	case codes.Aborted, codes.ResourceExhausted:
		if !hasDelay {
			return 0, false
		}
	default:
		return 0, false
	}
	if !hasDelay {
		return c.backoff(n), true
	}
	if delay > c.maxRetryDelay {
		return 0, false
	}
	return delay + mrand.N(delay/10+time.Millisecond), true
}

func retryDelay(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

func (c *client) backoff(n int) time.Duration {
	d := c.maxBackoff
	if n < 30 {
		d = min(c.minBackoff<<n, c.maxBackoff)
	}
	return d/2 + mrand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
