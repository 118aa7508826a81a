package grpcidem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/internal/retry"
	"github.com/idemkit/idemkit/keyer"
)

// Defaults of the client options.
const (
	DefaultMaxAttempts   = retry.DefaultMaxAttempts
	DefaultMinBackoff    = retry.DefaultMinBackoff
	DefaultMaxBackoff    = retry.DefaultMaxBackoff
	DefaultMaxRetryDelay = retry.DefaultMaxDelay
)

// Errors of the client interceptor, matched with errors.Is. Nothing was sent
// when either is returned.
var (
	// ErrKeyReused: a key given with WithKey was already sent with a
	// different method or request message.
	ErrKeyReused = errors.New("grpcidem: key reused for a different request")
	// ErrInvalidKey: a key given with WithKey, or made by WithKeyFunc's
	// function, breaks keyer's key rule (keyer.CheckKey: 1 to
	// keyer.MaxKeyLen visible ASCII characters, not "null"), the rule the
	// server interceptor applies too.
	ErrInvalidKey = errors.New("grpcidem: invalid idempotency key")
)

// ClientOption configures UnaryClientInterceptor. An option returns an
// error for a value it cannot use; UnaryClientInterceptor reports it
// (matching store.ErrInvalid) and builds nothing.
type ClientOption func(*client) error

// WithMaxAttempts bounds the attempts of one call, the first included
// (default 4); 1 disables retries. A value below 1 is an error.
func WithMaxAttempts(n int) ClientOption {
	return func(c *client) error {
		if err := retry.CheckAttempts("WithMaxAttempts", n); err != nil {
			return err
		}
		c.policy.MaxAttempts = n
		return nil
	}
}

// WithBackoff sets the backoff between attempts that have no RetryInfo:
// attempt n waits a random time between half and all of lo·2ⁿ, at most hi
// (defaults 100ms and 5s). Values that are not positive, or hi below lo,
// are an error.
func WithBackoff(lo, hi time.Duration) ClientOption {
	return func(c *client) error {
		if err := retry.CheckBackoff("WithBackoff", lo, hi); err != nil {
			return err
		}
		c.policy.MinBackoff, c.policy.MaxBackoff = lo, hi
		return nil
	}
}

// WithMaxRetryDelay sets the longest RetryInfo delay the client waits for
// (default 30s); a longer one ends the call with the server's status. A
// value that is not positive is an error.
func WithMaxRetryDelay(d time.Duration) ClientOption {
	return func(c *client) error {
		if err := retry.CheckDelay("WithMaxRetryDelay", d); err != nil {
			return err
		}
		c.policy.MaxDelay = d
		return nil
	}
}

// WithKeyedMethods sets which methods get a key (default: all). Calls of
// other methods are sent as they are and never retried. A nil function is
// an error.
func WithKeyedMethods(fn func(fullMethod string) bool) ClientOption {
	return func(c *client) error {
		if err := retry.CheckFunc("WithKeyedMethods", fn == nil, "every method"); err != nil {
			return err
		}
		c.keyed = fn
		return nil
	}
}

// WithKeyFunc sets how fresh keys are made (default: a random UUID v4). The
// function must return a distinct key valid under keyer.CheckKey on every
// call; a call whose key is not valid fails with ErrInvalidKey before
// anything is sent. A nil function is an error.
func WithKeyFunc(fn func() string) ClientOption {
	return func(c *client) error {
		if err := retry.CheckFunc("WithKeyFunc", fn == nil, "random UUIDs"); err != nil {
			return err
		}
		c.newKey = fn
		return nil
	}
}

type client struct {
	policy retry.Policy // policy.Sleep is replaced by tests
	keyed  func(string) bool
	newKey func() string
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
// documentation says. A nil option or an invalid value is an error matching
// store.ErrInvalid that names the option and what to pass instead.
func UnaryClientInterceptor(opts ...ClientOption) (grpc.UnaryClientInterceptor, error) {
	c, err := newClient(opts...)
	if err != nil {
		return nil, err
	}
	return c.intercept, nil
}

func newClient(opts ...ClientOption) (*client, error) {
	c := &client{
		policy: retry.Default(),
		keyed:  func(string) bool { return true },
		newKey: newKey,
	}
	c.policy.Sleep = retry.Sleep
	if err := invalid.Apply(c, opts); err != nil {
		return nil, fmt.Errorf("grpcidem: client interceptor: %w", err)
	}
	return c, nil
}

// validKey applies keyer's key rule, the one the server interceptor applies.
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
			if err := validKey(key); err != nil {
				return err
			}
		}
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, key)
		keyed = true
	}
	var err error
	_, werr := c.policy.Loop(ctx, keyed, func(n int, last bool) (time.Duration, bool) {
		var hdr, trl metadata.MD
		err = invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
		if rp != nil {
			*rp = IsReplayed(hdr) || IsReplayed(trl)
		}
		if err == nil || last || ctx.Err() != nil {
			return 0, false
		}
		return c.retryable(err, n)
	})
	if werr != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
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
	return c.policy.Wait(n, hasDelay, delay)
}

func retryDelay(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}
