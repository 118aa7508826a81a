package dedup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/store"
)

// fingerprint is the fingerprint of every record Process writes. It does not
// vary with the message (an id names one event), but it tells a dedup record
// apart from a record of another kind under the same key.
const fingerprint = "dedup/v1"

// Deduper runs the work of each message id once while the message is
// delivered at least once. It is safe for concurrent use by multiple
// goroutines.
type Deduper struct {
	s    store.Store
	opts options
	// prefix is put before every id to form the store key.
	prefix string
}

// New returns a Deduper that records ids in s. It fails when s is nil or an
// option is out of range (a lease shorter than MinLease, a non-positive
// retention, a scope the store cannot hold).
func New(s store.Store, opts ...Option) (*Deduper, error) {
	if s == nil {
		return nil, fmt.Errorf("dedup: new: %w: nil store", store.ErrInvalid)
	}
	o := defaults()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.lease < MinLease {
		return nil, fmt.Errorf("dedup: new: %w: lease %v is shorter than %v", store.ErrInvalid, o.lease, MinLease)
	}
	if o.retention <= 0 {
		return nil, fmt.Errorf("dedup: new: %w: retention %v is not positive", store.ErrInvalid, o.retention)
	}
	// The scope is length-prefixed, so no scope and id can spell another
	// scope's key: "dedup:6:stripe:evt_1", or "dedup:0::evt_1" without scope.
	d := &Deduper{s: s, opts: o, prefix: "dedup:" + strconv.Itoa(len(o.scope)) + ":" + o.scope + ":"}
	if err := store.CheckKey(d.prefix + "x"); err != nil {
		return nil, fmt.Errorf("dedup: new: scope: %w", err)
	}
	return d, nil
}

// Key returns the store key under which id is recorded, for callers that
// want to inspect the record with the store's Get. It is
// "dedup:<len(scope)>:<scope>:<id>", for example "dedup:6:stripe:evt_1".
func (d *Deduper) Key(id string) string {
	return d.prefix + id
}

// Process runs fn once for id, however many times the message is delivered:
// it claims id, runs fn, and records id as processed when fn returns nil.
// The Outcome says what happened and what to do with the message (see
// Outcome); the error is non-nil exactly when the outcome is Failed.
//
//   - The first delivery claims id, calls fn, and returns Processed.
//   - A delivery of an id already processed returns Duplicate without
//     calling fn.
//   - A delivery of an id that another delivery is processing right now
//     returns InFlight without calling fn.
//   - When fn returns an error, Process releases id so the redelivery runs
//     fn again, and returns Failed with fn's error (errors.Is matches it).
//   - When fn panics, Process releases id and lets the panic continue.
//
// While fn runs, Process renews the claim's lease every lease/2 (a
// heartbeat), so a redelivery of a slow message finds it InFlight rather
// than running it a second time. If a renewal finds that the lease lapsed and
// another delivery claimed id (the consumer was paused for longer than the
// lease: a GC pause, a lost network, a suspended VM), Process cancels the
// context passed to fn, with context.Cause(ctx) matching store.ErrLeaseLost,
// and does not record id: Process returns Failed with an error matching
// store.ErrLeaseLost (and fn's error, if fn returned one). If the takeover
// happened after the last renewal, the store itself refuses this run's
// completion (fencing) and Process returns the same. Either way the record
// belongs to the other delivery and is left untouched; nack the message,
// its redelivery will be a Duplicate once the other delivery finished. fn's
// effect may then have happened twice: make effects outside your database
// idempotent themselves (forward id to the provider), or use ProcessTx.
//
// fn receives a context derived from ctx. Once fn has returned, Process
// records the result even if ctx has been cancelled meanwhile (bounded by the
// lease), because the effect has already happened.
//
// Process uses leases on every store, including a store.Transactor; use
// ProcessTx to run fn in the store's transaction.
func (d *Deduper) Process(ctx context.Context, id string, fn func(ctx context.Context) error) (Outcome, error) {
	key, err := d.check(ctx, "process", id, fn)
	if err != nil {
		return Failed, err
	}
	token := store.NewToken()
	c, err := d.s.Claim(ctx, key, fingerprint, token, d.opts.lease)
	if err != nil {
		return Failed, fmt.Errorf("dedup: claim %q: %w", id, err)
	}
	if c.Outcome != store.Acquired {
		return d.notAcquired(ctx, id, c)
	}
	return d.run(ctx, id, key, token, fn)
}

// run calls fn for an acquired id with a heartbeat, then completes or
// releases the id.
func (d *Deduper) run(ctx context.Context, id, key string, token store.Token, fn func(ctx context.Context) error) (Outcome, error) {
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hb := d.startHeartbeat(ctx, id, key, token, cancel)

	// No recover: if fn panics (or calls runtime.Goexit), this deferred
	// function stops the heartbeat and releases id while the panic goes on
	// with its original stack.
	returned := false
	defer func() {
		if !returned {
			hb.halt()
			d.log(ctx, slog.LevelError, "fn panicked (or called runtime.Goexit); releasing the id", id)
			_ = d.release(ctx, id, key, token)
		}
	}()
	fnErr := fn(fnCtx)
	returned = true
	lost := hb.halt()

	switch {
	case lost != nil && fnErr != nil:
		return Failed, fmt.Errorf("%w; fn returned: %w", lost, fnErr)
	case lost != nil:
		return Failed, lost
	case fnErr != nil:
		if err := d.release(ctx, id, key, token); err != nil {
			return Failed, errors.Join(fnErr, err)
		}
		return Failed, fnErr
	}
	if err := d.complete(ctx, id, key, token); err != nil {
		return Failed, err
	}
	return Processed, nil
}

// check validates Process's arguments and returns the store key for id.
func (d *Deduper) check(ctx context.Context, op, id string, fn func(ctx context.Context) error) (string, error) {
	if fn == nil {
		return "", fmt.Errorf("dedup: %s %q: %w: nil fn", op, id, store.ErrInvalid)
	}
	if ctx == nil {
		return "", fmt.Errorf("dedup: %s %q: %w: nil context", op, id, store.ErrInvalid)
	}
	if id == "" {
		return "", fmt.Errorf("dedup: %s: %w: empty id", op, store.ErrInvalid)
	}
	key := d.Key(id)
	if err := store.CheckKey(key); err != nil {
		return "", fmt.Errorf("dedup: %s: id: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("dedup: %s %q: %w", op, id, err)
	}
	return key, nil
}

// notAcquired maps the outcome of a claim that did not acquire id.
func (d *Deduper) notAcquired(ctx context.Context, id string, c store.Claim) (Outcome, error) {
	switch c.Outcome {
	case store.Completed:
		d.log(ctx, slog.LevelDebug, "duplicate of a processed id", id)
		return Duplicate, nil
	case store.InProgress:
		d.log(ctx, slog.LevelDebug, "duplicate of an id in flight", id,
			slog.Time("locked_until", c.Record.LockedUntil))
		return InFlight, nil
	case store.Mismatch:
		// The key holds a record that another component wrote with another
		// fingerprint: a store shared without separate keys.
		return Failed, fmt.Errorf("dedup: claim %q: key %q holds a record that dedup did not write (fingerprint %q)",
			id, c.Record.Key, c.Record.Fingerprint)
	}
	return Failed, fmt.Errorf("dedup: claim %q: unexpected outcome %v", id, c.Outcome)
}

// settleContext is the context for Complete and Release after fn returned:
// not cancelled with ctx, because the effect has already happened, but
// bounded by the lease, after which the claim means nothing anyway.
func (d *Deduper) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.opts.lease)
}

// complete records id as processed, retrying a failed backend a few times
// (Complete is safe to retry). ErrLeaseLost and ErrInvalid are final.
func (d *Deduper) complete(ctx context.Context, id, key string, token store.Token) error {
	sctx, cancel := d.settleContext(ctx)
	defer cancel()
	const attempts = 3
	backoff := 20 * time.Millisecond
	var err error
	for i := 0; ; i++ {
		err = d.s.Complete(sctx, key, token, nil, d.opts.retention)
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInvalid) || i == attempts-1 {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-sctx.Done():
			t.Stop()
		case <-t.C:
		}
		if sctx.Err() != nil {
			break
		}
		backoff *= 2
	}
	if errors.Is(err, store.ErrLeaseLost) {
		// The lease lapsed before fn returned. If no other delivery has
		// claimed the id since, claiming it again with the same token
		// succeeds and the completion can be recorded; otherwise the store
		// decided atomically that the id is the other delivery's.
		c, cerr := d.s.Claim(sctx, key, fingerprint, token, d.opts.lease)
		if cerr == nil && c.Outcome == store.Acquired {
			err = d.s.Complete(sctx, key, token, nil, d.opts.retention)
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrLeaseLost) {
		d.log(ctx, slog.LevelWarn, "completion refused: the lease lapsed and another delivery took the id", id)
		return fmt.Errorf("dedup: complete %q: the lease lapsed and another delivery took the id: %w", id, err)
	}
	d.log(ctx, slog.LevelError, "could not record the id as processed; a redelivery will run fn again", id,
		slog.Any("error", err))
	return fmt.Errorf("dedup: complete %q: %w", id, err)
}

// release gives up the claim so a redelivery runs fn again. A failure is
// logged and returned; the claim then lapses with its lease.
func (d *Deduper) release(ctx context.Context, id, key string, token store.Token) error {
	sctx, cancel := d.settleContext(ctx)
	defer cancel()
	if err := d.s.Release(sctx, key, token); err != nil {
		d.log(ctx, slog.LevelError, "release failed; the id stays in flight until its lease lapses", id,
			slog.Any("error", err))
		return fmt.Errorf("dedup: release %q: %w", id, err)
	}
	return nil
}

func (d *Deduper) log(ctx context.Context, level slog.Level, msg, id string, attrs ...slog.Attr) {
	if !d.opts.logger.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String("id", id))
	if d.opts.scope != "" {
		attrs = append(attrs, slog.String("scope", d.opts.scope))
	}
	d.opts.logger.LogAttrs(ctx, level, "dedup: "+msg, attrs...)
}
