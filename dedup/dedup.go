package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/internal/invalid"
	"log/slog"
	"strings"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// fingerprint is the fingerprint of every record Process writes. It does not
// vary with the message (an id names one event), but it tells a dedup record
// apart from a record of another kind under the same key. ProcessWith adds
// the payload's fingerprint after a colon.
const fingerprint = "dedup/v1"

// Deduper processes each message id once. It is safe for concurrent use.
// It is a thin adapter over an *idem.Engine: the engine's lease, wait,
// retention, logger, key redactor and tracer apply to every message.
type Deduper struct {
	e     *idem.Engine
	scope string
	run   []idem.RunOption
	tx    []idem.RunOption
}

// New returns a Deduper that runs every message through e. It fails with
// an error matching store.ErrInvalid for a nil engine, a nil option or an
// option given an invalid value.
func New(e *idem.Engine, opts ...Option) (*Deduper, error) {
	if e == nil {
		return nil, fmt.Errorf("dedup: new: nil engine (build one with idem.New): %w", store.ErrInvalid)
	}
	o := options{}
	if err := invalid.Apply(&o, opts); err != nil {
		return nil, fmt.Errorf("dedup: new: %w", err)
	}
	d := &Deduper{e: e, scope: o.scope}
	if _, err := d.Key("x"); err != nil {
		return nil, fmt.Errorf("dedup: new: WithScope(%q): %w: %w", o.scope, store.ErrInvalid, err)
	}
	d.run = []idem.RunOption{idem.WithSameRequest(sameDelivery)}
	d.tx = append(d.run[:1:1], idem.InTx())
	return d, nil
}

// sameDelivery: a record written without a payload fingerprint cannot be
// compared with one written with it; both are dedup's, so the id decides.
func sameDelivery(recorded, presented string) bool {
	return (recorded == fingerprint && strings.HasPrefix(presented, fingerprint)) ||
		(presented == fingerprint && strings.HasPrefix(recorded, fingerprint))
}

// Key returns the store key of a message id: keyer.ScopedKey of the id
// with the scope "dedup" and the WithScope scope, the one namespacing
// encoding of idemkit. It fails for an id ScopedKey refuses (empty, longer
// than keyer.MaxKeyLen, not valid UTF-8, a NUL byte).
func (d *Deduper) Key(id string) (string, error) {
	return keyer.ScopedKey(id, "dedup", d.scope)
}

// Fingerprint returns a fingerprint of a message's payload for ProcessWith:
// the hex SHA-256 of its bytes.
func Fingerprint(payload []byte) string {
	sum := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Process runs fn once for id, however many times the message is delivered:
// it claims id, runs fn, and records id as processed when fn returns nil.
// The Outcome says what happened and what to do with the message (see
// Outcome); the error is non-nil exactly when the outcome is Failed.
//
//   - The first delivery claims id, calls fn, and returns Processed.
//   - A delivery of an id already processed returns Duplicate without
//     calling fn. Without a fingerprint (Process), the same id is a
//     duplicate whatever its payload; use ProcessWith to tell a redelivery
//     from a different message that reuses the id.
//   - A delivery of an id that another delivery is processing right now
//     returns InFlight without calling fn.
//   - When fn returns an error, Process releases id so the redelivery runs
//     fn again, and returns Failed with fn's error (errors.Is matches it).
//   - When fn panics, Process releases id and lets the panic continue.
//
// While fn runs, and until its completion is recorded, the lease is renewed
// every lease/2 (a heartbeat), independently of ctx: cancelling ctx cancels
// fn's context, never the renewal while fn still runs. If the lease is lost
// (another delivery claimed id after the consumer was frozen for longer than
// the lease, or renewals failed until it ran out), fn's context is cancelled
// with context.Cause(ctx) matching store.ErrLeaseLost, and Process returns
// Failed with an error matching store.ErrLeaseLost (and fn's error, if fn
// returned one); the record belongs to the other delivery and is left
// untouched. fn's effect may then have happened twice: make effects outside
// your database idempotent themselves (forward id to the provider), or use
// ProcessTx.
//
// Once fn has returned nil, Process records id even if ctx has been
// cancelled meanwhile, retrying a failing store with backoff for as long as
// the lease holds (see package idem): a store restart or pause of a few
// seconds between fn and the record never makes a redelivery run fn again.
//
// Process uses leases on every store, including a store.Transactor; use
// ProcessTx to run fn in the store's transaction.
func (d *Deduper) Process(ctx context.Context, id string, fn func(ctx context.Context) error) (Outcome, error) {
	return d.process(ctx, "process", id, fingerprint, fn)
}

// ProcessWith is Process with the fingerprint of the message's payload
// (Fingerprint(payload), or any string of your own that identifies the
// payload): a delivery of a processed or in-flight id with another
// fingerprint returns Mismatch without calling fn, instead of Duplicate,
// so a different message that reuses an id is reported rather than silently
// skipped. A record written by Process (no fingerprint) matches any.
func (d *Deduper) ProcessWith(ctx context.Context, id, payloadFingerprint string, fn func(ctx context.Context) error) (Outcome, error) {
	if payloadFingerprint == "" {
		return Failed, fmt.Errorf("dedup: process %q: %w: empty fingerprint", d.show(id), store.ErrInvalid)
	}
	return d.process(ctx, "process", id, fingerprint+":"+payloadFingerprint, fn)
}

func (d *Deduper) process(ctx context.Context, op, id, fp string, fn func(ctx context.Context) error) (Outcome, error) {
	key, err := d.check(ctx, op, id, fn)
	if err != nil {
		return Failed, err
	}
	if err := store.CheckClaim(key, fp, "t", d.e.Lease()); err != nil {
		return Failed, fmt.Errorf("dedup: %s %q: fingerprint: %w", op, d.show(id), err)
	}
	return d.do(ctx, d.run, id, key, fp, fn)
}

// run is the one adapter over the engine for Process and ProcessTx: fn's
// error says its effect did not happen (release, or roll back); nil says it
// did (record).
func (d *Deduper) do(ctx context.Context, ro []idem.RunOption, id, key, fp string, fn func(ctx context.Context) error) (Outcome, error) {
	var fnErr, cause error
	res, err := d.e.Run(ctx, key, fp, func(wctx context.Context) idem.Verdict {
		fnErr = fn(wctx)
		cause = context.Cause(wctx)
		if fnErr != nil {
			return idem.Discard(fnErr.Error())
		}
		return idem.Keep(nil)
	}, ro...)
	switch res.Outcome {
	case store.Completed:
		d.log(ctx, slog.LevelDebug, "duplicate of a processed id", id)
		return Duplicate, nil
	case store.InProgress:
		d.log(ctx, slog.LevelDebug, "duplicate of an id in flight", id, slog.Time("locked_until", res.Record.LockedUntil))
		return InFlight, nil
	case store.Mismatch:
		if !strings.HasPrefix(res.Record.Fingerprint, fingerprint) {
			// The key holds a record that another component wrote: a store
			// shared without separate keys.
			return Failed, fmt.Errorf("dedup: claim %q: key %q holds a record that dedup did not write (fingerprint %q)",
				d.show(id), d.show(res.Record.Key), res.Record.Fingerprint)
		}
		d.log(ctx, slog.LevelWarn, "id reused with a different payload", id)
		return Mismatch, nil
	case store.Acquired:
	default:
		return Failed, fmt.Errorf("dedup: claim %q: %w", d.show(id), err)
	}
	lost := errors.Is(err, store.ErrLeaseLost) || errors.Is(cause, store.ErrLeaseLost)
	switch {
	case lost && fnErr != nil:
		if err == nil {
			err = fmt.Errorf("dedup: %q: the lease ran out while fn ran: %w", d.show(id), store.ErrLeaseLost)
		}
		return Failed, fmt.Errorf("%w; fn returned: %w", err, fnErr)
	case fnErr != nil && err != nil:
		d.log(ctx, slog.LevelError, "release failed; the id stays in flight until its lease lapses", id, slog.Any("error", err))
		return Failed, errors.Join(fnErr, fmt.Errorf("dedup: release %q: %w", d.show(id), err))
	case fnErr != nil:
		return Failed, fnErr
	case err != nil:
		d.log(ctx, slog.LevelError, "could not record the id as processed", id, slog.Any("error", err))
		return Failed, fmt.Errorf("dedup: complete %q: %w", d.show(id), err)
	}
	return Processed, nil
}

// check validates Process's arguments and returns the store key for id.
func (d *Deduper) check(ctx context.Context, op, id string, fn func(ctx context.Context) error) (string, error) {
	if fn == nil {
		return "", fmt.Errorf("dedup: %s %q: %w: nil fn", op, d.show(id), store.ErrInvalid)
	}
	if ctx == nil {
		return "", fmt.Errorf("dedup: %s %q: %w: nil context", op, d.show(id), store.ErrInvalid)
	}
	if id == "" {
		return "", fmt.Errorf("dedup: %s: empty id: %w", op, store.ErrInvalid)
	}
	key, err := d.Key(id)
	if err != nil {
		return "", fmt.Errorf("dedup: %s: id: %w: %w", op, store.ErrInvalid, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("dedup: %s %q: %w", op, d.show(id), err)
	}
	return key, nil
}

// show returns an id (or the scope) as log lines and error texts carry it:
// through the key redactor.
func (d *Deduper) show(id string) string { return d.e.RedactKey(id) }

func (d *Deduper) log(ctx context.Context, level slog.Level, msg, id string, attrs ...slog.Attr) {
	l := d.e.Logger()
	if !l.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String("id", d.show(id)))
	if d.scope != "" {
		attrs = append(attrs, slog.String("scope", d.show(d.scope)))
	}
	l.LogAttrs(ctx, level, "dedup: "+msg, attrs...)
}
