package seal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Option configures New.
type Option func(*options) error

type options struct {
	scope func(key string) string
}

// WithScope sets how a store key maps to its scope: the tenant whose keys
// seal it (default: every key in the one scope ""). For keys made by
// keyer.ScopedKey, return the part that names the tenant (see the package
// example). The function must be deterministic: a key's scope never
// changes while its record is kept.
func WithScope(scope func(key string) string) Option {
	return func(o *options) error {
		if scope == nil {
			return errors.New("nil scope function")
		}
		o.scope = scope
		return nil
	}
}

// Store is what New returns: a store.Store that seals what it writes and
// opens what it reads. Its dynamic type implements store.Transactor exactly
// when the wrapped store does, and store.Purger exactly when the wrapped
// store does; Migrate and Close always exist and call the wrapped store's
// when it has them.
type Store interface {
	store.Store
	store.Migrator
	io.Closer
	// Unwrap returns the wrapped store.
	Unwrap() store.Store
}

// New returns a store that seals responses and fingerprints before inner
// stores them, under keys from keys. It reports an error matching
// store.ErrInvalid for a nil store or provider, a nil option or an invalid
// value.
func New(inner store.Store, keys KeyProvider, opts ...Option) (Store, error) {
	if inner == nil {
		return nil, fmt.Errorf("seal: new: %w: nil store", store.ErrInvalid)
	}
	if keys == nil {
		return nil, fmt.Errorf("seal: new: %w: nil key provider", store.ErrInvalid)
	}
	o := options{scope: func(string) string { return "" }}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("seal: new: %w: option %d is nil", store.ErrInvalid, i)
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("seal: new: %w: %w", store.ErrInvalid, err)
		}
	}
	s := &sealed{inner: inner, scope: o.scope, kr: &keyring{p: keys}}
	return withCapabilities(s), nil
}

// sealed is the Store without the optional interfaces of the inner store.
type sealed struct {
	inner store.Store
	scope func(string) string
	kr    *keyring
}

// Claim implements store.Store. The fingerprint is sealed under the
// scope's current key; a record whose fingerprint was sealed under an
// older key of the scope is recognised and claimed with that form. A
// completed record's response is opened; one sealed under a key the
// provider no longer has replays as "kept without response".
func (s *sealed) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("seal: claim: %w", err)
	}
	if len(fingerprint) > MaxFingerprintLen {
		return store.Claim{}, fmt.Errorf("seal: claim: %w: fingerprint is %d bytes; a sealed store takes at most %d", store.ErrInvalid, len(fingerprint), MaxFingerprintLen)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("seal: claim: %w", err)
	}
	scope := s.scope(key)
	cur, err := s.kr.current(ctx, scope)
	if err != nil {
		return store.Claim{}, fmt.Errorf("seal: claim: %w", err)
	}
	c, err := s.inner.Claim(ctx, key, cur.sealFingerprint(key, fingerprint), token, lease)
	if err != nil {
		return c, err
	}
	if c.Outcome == store.Mismatch && fingerprint != "" {
		if id, ok := fingerprintKeyID(c.Record.Fingerprint); ok && id != cur.id {
			old, err := s.kr.byID(ctx, scope, id)
			switch {
			case err == nil && old.sealFingerprint(key, fingerprint) == c.Record.Fingerprint:
				// The same request, sealed before a rotation: claim with
				// the form the store holds, and let the store decide.
				if c, err = s.inner.Claim(ctx, key, c.Record.Fingerprint, token, lease); err != nil {
					return c, err
				}
			case isNotFound(err) && c.Record.Status == store.StatusCompleted:
				// Sealed under a deleted key: done, but neither its
				// fingerprint nor its response can be read.
				c.Outcome = store.Completed
				c.Record.Fingerprint = fingerprint
				c.Record.Response = append([]byte(nil), notKept...)
				return c, nil
			case err != nil && !isNotFound(err):
				return store.Claim{}, fmt.Errorf("seal: claim: %w", err)
			}
		}
	}
	if c.Outcome != store.Mismatch {
		c.Record.Fingerprint = fingerprint
	}
	if c.Record, err = s.open(ctx, scope, key, c.Record, c.Outcome == store.Mismatch, cur); err != nil {
		return store.Claim{}, fmt.Errorf("seal: claim: %w", err)
	}
	return c, nil
}

// open opens r's response (completed records) and, with fp, its fingerprint.
// What was sealed under a deleted key cannot be opened: the response is
// then the engine's "kept without response" marker and the fingerprint is
// left in its sealed form.
//
// cur, when not nil, is the scope's current key as the provider returned it
// during this call: a record sealed under it opens without asking again.
func (s *sealed) open(ctx context.Context, scope, key string, r store.Record, fp bool, cur *derived) (store.Record, error) {
	if fp {
		if id, ok := fingerprintKeyID(r.Fingerprint); ok {
			d, err := s.kr.byID(ctx, scope, id)
			switch {
			case err == nil:
				if r.Fingerprint, err = d.openFingerprint(key, r.Fingerprint); err != nil {
					return r, err
				}
			case !isNotFound(err):
				return r, err
			}
		} else if r.Fingerprint != "" {
			return r, fmt.Errorf("%w: the stored fingerprint is not a sealed fingerprint", ErrCorrupt)
		}
	}
	if r.Status != store.StatusCompleted {
		return r, nil
	}
	id, err := responseKeyID(r.Response)
	if err != nil {
		return r, err
	}
	d := cur
	if d == nil || d.id != string(id) {
		d, err = s.kr.byID(ctx, scope, string(id))
	}
	switch {
	case isNotFound(err):
		r.Response = append([]byte(nil), notKept...)
		return r, nil
	case err != nil:
		return r, err
	}
	r.Response, err = d.openResponse(key, r.Response)
	return r, err
}

// Complete implements store.Store: it seals response under the scope's
// current key, with key as associated data, and stores that.
func (s *sealed) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("seal: complete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("seal: complete: %w", err)
	}
	cur, err := s.kr.current(ctx, s.scope(key))
	if err != nil {
		return fmt.Errorf("seal: complete: %w", err)
	}
	return s.inner.Complete(ctx, key, token, cur.sealResponse(key, response), retention)
}

// Release implements store.Store; nothing in it is sealed.
func (s *sealed) Release(ctx context.Context, key string, token store.Token) error {
	return s.inner.Release(ctx, key, token)
}

// Renew implements store.Store: the wrapped store's Renew. A lease carries
// nothing sealed.
func (s *sealed) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	return s.inner.Renew(ctx, key, token, lease)
}

// Get implements store.Store: the record with its fingerprint and response
// opened (see Claim for records sealed under a deleted key).
func (s *sealed) Get(ctx context.Context, key string) (store.Record, error) {
	r, err := s.inner.Get(ctx, key)
	if err != nil {
		return r, err
	}
	if r, err = s.open(ctx, s.scope(key), key, r, true, nil); err != nil {
		return store.Record{}, fmt.Errorf("seal: get: %w", err)
	}
	return r, nil
}

// Migrate runs the wrapped store's Migrate, if it has one.
func (s *sealed) Migrate(ctx context.Context) error { return store.Migrate(ctx, s.inner) }

// Close closes the wrapped store, if it has a Close: a sealed store made
// around a store opened from a URL closes it once.
func (s *sealed) Close() error { return store.Close(s.inner) }

// Unwrap returns the wrapped store.
func (s *sealed) Unwrap() store.Store { return s.inner }
