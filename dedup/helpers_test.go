package dedup_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// newDeduper returns a Deduper on s, failing the test on error.
func newDeduper(t *testing.T, s store.Store, opts ...dedup.Option) *dedup.Deduper {
	t.Helper()
	d, err := dedup.New(s, opts...)
	require.NoError(t, err)
	return d
}

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
	return 600 * time.Millisecond
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

// manualTicker is a heartbeat ticker that ticks when the test says so, and
// counts how many tickers were started and stopped.
type manualTicker struct {
	c                chan time.Time
	started, stopped atomic.Int32
	interval         atomic.Int64
}

func newManualTicker() *manualTicker { return &manualTicker{c: make(chan time.Time)} }

func (m *manualTicker) new(d time.Duration) (<-chan time.Time, func()) {
	m.started.Add(1)
	m.interval.Store(int64(d))
	return m.c, func() { m.stopped.Add(1) }
}

// tick delivers one tick; it returns once a heartbeat has received it.
func (m *manualTicker) tick(t *testing.T) {
	t.Helper()
	select {
	case m.c <- time.Now():
	case <-t.Context().Done():
		t.Fatal("no heartbeat took the tick")
	}
}

// beat is what one heartbeat renewal saw.
type beat struct {
	lost bool
	err  error
}

// beatRecorder collects heartbeat results.
func beatRecorder() (chan beat, dedup.Option) {
	ch := make(chan beat, 16)
	return ch, dedup.WithBeatHook(func(lost bool, err error) { ch <- beat{lost, err} })
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
