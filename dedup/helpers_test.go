package dedup_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// newDeduper returns a Deduper on an engine for s, failing the test on
// error: opts are idem.Options (the engine's) or dedup.Options. Unless a
// test says otherwise, an id in flight is reported at once
// (idem.WithWait(0)).
func newDeduper(t testing.TB, s store.Store, opts ...any) *dedup.Deduper {
	t.Helper()
	d, err := newDedup(s, opts...)
	require.NoError(t, err)
	return d
}

func newDedup(s store.Store, opts ...any) (*dedup.Deduper, error) {
	eopts := []idem.Option{idem.WithWait(0)}
	var dopts []dedup.Option
	for _, o := range opts {
		switch o := o.(type) {
		case idem.Option:
			eopts = append(eopts, o)
		case dedup.Option:
			dopts = append(dopts, o)
		default:
			panic(fmt.Sprintf("newDeduper: option of type %T", o))
		}
	}
	e, err := idem.New(s, eopts...)
	if err != nil {
		return nil, err
	}
	return dedup.New(e, dopts...)
}

// events turns a func into a Tracer that sees every Event of a run.
type events func(idem.Event)

func (events) TraceRunStart(ctx context.Context, _ idem.RunStart) context.Context { return ctx }
func (events) TraceRunEnd(context.Context, idem.RunEnd)                           {}
func (f events) TraceEvent(_ context.Context, ev idem.Event)                      { f(ev) }

// effects counts how many times each id's effect was applied: the thing that
// must happen once.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func newEffects() *effects { return &effects{n: map[string]int{}} }

// apply records one application of id's effect and returns how many there
// have been, this one included.
func (e *effects) apply(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[id]++
	return e.n[id]
}

func (e *effects) count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

// fn returns a Process callback that applies id's effect.
func (e *effects) fn(id string) func(context.Context) error {
	return func(context.Context) error {
		e.apply(id)
		return nil
	}
}

// leaseFor is a lease the test can make lapse: long on a manual clock (it is
// advanced, not waited for), short on the real clock (it is waited for).
func leaseFor(subj storetest.Subject) time.Duration {
	if subj.Clock != nil {
		return 30 * time.Second
	}
	return time.Second
}

// advance moves the store's time forward by d: instantly on a manual clock,
// by sleeping on the real one (where the real clock is what is under test).
func advance(t *testing.T, subj storetest.Subject, d time.Duration) {
	t.Helper()
	if subj.Clock != nil {
		subj.Clock.Advance(d)
		return
	}
	time.Sleep(d)
}

// freezer makes a consumer's renewals hang, as a frozen process (a GC
// pause, a suspended VM) sends none: while frozen, every Renew, and every
// Claim after the first, waits until thaw or until its context ends.
type freezer struct {
	store.Store
	mu     sync.Mutex
	claims int
	frozen chan struct{} // closed by thaw; nil when not frozen
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = make(chan struct{})
	f.mu.Unlock()
}

func (f *freezer) thaw() {
	f.mu.Lock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen = nil
	}
	f.mu.Unlock()
}

func (f *freezer) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	f.mu.Lock()
	f.claims++
	frozen := f.frozen
	first := f.claims == 1
	f.mu.Unlock()
	if frozen != nil && !first {
		select {
		case <-frozen:
		case <-ctx.Done():
			return store.Claim{}, ctx.Err()
		}
	}
	return f.Store.Claim(ctx, key, fp, tok, lease)
}

func (f *freezer) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	f.mu.Lock()
	frozen := f.frozen
	f.mu.Unlock()
	if frozen != nil {
		select {
		case <-frozen:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.Store.Renew(ctx, key, tok, lease)
}

// realClockOnly skips a test whose subject is the heartbeat, which runs on
// the process clock, on a store with a manual clock.
func realClockOnly(t *testing.T, subj storetest.Subject) {
	t.Helper()
	if subj.Clock != nil {
		t.Skip("needs the real clock: the heartbeat runs on it")
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting on a channel")
	}
	var zero T
	return zero
}

// keyOf is d.Key for an id the test knows is valid.
func keyOf(d *dedup.Deduper, id string) string {
	k, err := d.Key(id)
	if err != nil {
		panic(err)
	}
	return k
}
