package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/internal/invalid"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// Errors returned by Do for a key that did not run. Compare with errors.Is.
var (
	// ErrInProgress: another call holds the key and is running its work
	// (after waiting, with WithWait). Retry later with the same key.
	ErrInProgress = errors.New("idem: key in progress")
	// ErrMismatch: the key was used with another fingerprint: a different
	// request reuses the key.
	ErrMismatch = errors.New("idem: key used with a different fingerprint")
)

// Codec turns Do's results into bytes to keep and back.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default Codec: encoding/json.
type JSON struct{}

// Marshal is json.Marshal.
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal is json.Unmarshal.
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// DoOption configures one Do call. A nil DoOption or an invalid value makes
// Do fail with store.ErrInvalid before anything runs.
type DoOption func(*doOptions) error

type doOptions struct {
	fingerprint string
	scope       []string
	codec       Codec
	maxResult   int
}

// WithFingerprint sets the fingerprint of the request (for example a hash
// of its arguments): a later call with the same key and another fingerprint
// gets ErrMismatch instead of the first call's result. Default: none, the
// key alone decides.
func WithFingerprint(fp string) DoOption {
	return func(o *doOptions) error {
		o.fingerprint = fp
		return nil
	}
}

// WithScope puts the key in a namespace (the tenant, the user, the job
// kind), so the same key in two scopes runs twice, once in each. The key is
// namespaced by keyer.ScopedKey (see DoKey): no scope and key can spell
// another scope's key.
func WithScope(parts ...string) DoOption {
	return func(o *doOptions) error {
		o.scope = append([]string(nil), parts...)
		return nil
	}
}

// WithCodec sets how results are kept (default JSON).
func WithCodec(c Codec) DoOption {
	return func(o *doOptions) error {
		if c == nil {
			return errors.New("WithCodec(nil): pass a Codec (JSON is the default)")
		}
		o.codec = c
		return nil
	}
}

// WithMaxResult sets the largest encoded result kept, in bytes (default
// DefaultMaxResponse; the rule is KeepUpTo's). A larger result is returned
// to this caller with an error matching ErrNotKept, and the key is recorded
// as done without it: later calls get ErrNotKept, never a second run.
func WithMaxResult(n int) DoOption {
	return func(o *doOptions) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxResult(%d): the limit must be positive", n)
		}
		o.maxResult = n
		return nil
	}
}

// DoKey returns the store key Do uses for key in scope: keyer.ScopedKey
// of key with the scope "do", then the scope parts. It fails (matching
// store.ErrInvalid, as a *keyer.KeyError) when ScopedKey refuses the key or
// the scope.
func DoKey(key string, scope ...string) (string, error) {
	return keyer.ScopedKey(key, append([]string{"do"}, scope...)...)
}

// Do runs fn once per key, however many times it is called (by retries,
// redeliveries, concurrent duplicates), and returns its typed result: the
// first call runs fn and keeps its result; every later call with the same
// key gets that result back without running fn. It follows the engine's
// rules (see the package documentation): fn's context is cancelled when
// the caller's is, or with store.ErrLeaseLost when the lease is lost; the
// lease is renewed while fn runs; the result is recorded even if the caller
// gives up meanwhile.
//
// fn returns an error only when its effect did not happen: the key is then
// released and the next call runs fn again; Do returns fn's error. A panic
// does the same and goes on.
//
// For a key that did not run here, Do returns the kept result (a replay),
// or ErrNotKept (done, but the result was too large or could not be
// encoded), ErrInProgress (another call is running it), ErrMismatch (the
// key was used with another fingerprint), or a store error matching
// ErrUnavailable (nothing ran). When fn ran and succeeded but its result
// could not be recorded, Do returns fn's result with the error
// (store.ErrLeaseLost or ErrNotRecorded).
func Do[T any](ctx context.Context, e *Engine, key string, fn func(ctx context.Context) (T, error), opts ...DoOption) (T, error) {
	var zero T
	if e == nil || fn == nil {
		return zero, fmt.Errorf("idem: do: nil engine or fn: %w", store.ErrInvalid)
	}
	o := doOptions{codec: JSON{}, maxResult: DefaultMaxResponse}
	if err := invalid.Apply(&o, opts); err != nil {
		return zero, fmt.Errorf("idem: do: %w", err)
	}
	skey, err := DoKey(key, o.scope...)
	if err != nil {
		return zero, fmt.Errorf("idem: do: %w: %w", store.ErrInvalid, err)
	}
	var (
		v      T
		fnErr  error
		encErr error
		big    bool
	)
	res, err := e.Run(ctx, skey, o.fingerprint, func(ctx context.Context) Verdict {
		var got T
		got, fnErr = fn(ctx)
		if fnErr != nil {
			return Discard(fnErr.Error())
		}
		// What the first caller gets is what a replay will get: the result
		// as the codec keeps it, encoded and decoded again.
		b, err := o.codec.Marshal(got)
		if err == nil {
			err = o.codec.Unmarshal(b, &v)
		}
		if err != nil {
			encErr = err
			e.Logger().WarnContext(ctx, "idem: do: the result cannot be kept by the codec; recorded without it", "key", e.show(skey), "err", e.scrub(skey, err))
			return KeepWithoutResponse("result cannot be encoded: " + err.Error())
		}
		verdict := KeepUpTo(o.maxResult, len(b), func() []byte { return b })
		big = verdict.kind == keepWithoutResponse
		return verdict
	})
	switch res.Outcome {
	case store.Acquired:
		switch {
		case fnErr != nil && err != nil:
			return zero, errors.Join(fnErr, err)
		case fnErr != nil:
			return zero, fnErr
		case encErr != nil:
			return zero, errors.Join(fmt.Errorf("idem: do %q: the codec cannot keep the result: %w: %w", e.show(skey), ErrNotKept, e.scrub(skey, encErr)), err)
		case big:
			return v, errors.Join(fmt.Errorf("idem: do %q: result over %d bytes: %w", e.show(skey), o.maxResult, ErrNotKept), err)
		}
		return v, err
	case store.Completed:
		if res.NotKept {
			return zero, fmt.Errorf("idem: do %q: %w", e.show(skey), ErrNotKept)
		}
		var out T
		if err := o.codec.Unmarshal(res.Record.Response, &out); err != nil {
			return zero, fmt.Errorf("idem: do %q: decode the kept result: %w", e.show(skey), e.scrub(skey, err))
		}
		return out, nil
	case store.InProgress:
		if err != nil {
			return zero, err
		}
		return zero, fmt.Errorf("idem: do %q: %w (lease until %v)", e.show(skey), ErrInProgress, res.Record.LockedUntil)
	case store.Mismatch:
		return zero, fmt.Errorf("idem: do %q: %w", e.show(skey), ErrMismatch)
	}
	return zero, err
}
