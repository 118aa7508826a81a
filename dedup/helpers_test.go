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

// manualTicker drives the heartbeat's timers by hand: a renewal runs when
// the test calls tick. It counts the timers started and stopped.
type manualTicker struct {
	mu               sync.Mutex
	timers           []*manualTimer
	started, stopped atomic.Int32
	interval         atomic.Int64
}

type manualTimer struct {
	m       *manualTicker
	f       func()
	armed   bool
	stopped bool
}

func newManualTicker() *manualTicker { return &manualTicker{} }

// new is the dedup.WithTimer constructor.
func (m *manualTicker) new(d time.Duration, f func()) dedup.Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started.Add(1)
	m.interval.Store(int64(d))
	tm := &manualTimer{m: m, f: f, armed: true}
	m.timers = append(m.timers, tm)
	return tm
}

func (tm *manualTimer) Stop() bool {
	tm.m.mu.Lock()
	defer tm.m.mu.Unlock()
	if !tm.stopped {
		tm.stopped = true
		tm.m.stopped.Add(1)
	}
	was := tm.armed
	tm.armed = false
	return was
}

func (tm *manualTimer) Reset(time.Duration) bool {
	tm.m.mu.Lock()
	defer tm.m.mu.Unlock()
	was := tm.armed
	tm.armed = true
	return was
}

// tick fires every armed timer, each in a goroutine of its own as
// time.AfterFunc does. It fails the test when no timer is armed.
func (m *manualTicker) tick(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	fired := 0
	for _, tm := range m.timers {
		if tm.armed {
			tm.armed = false
			fired++
			go tm.f()
		}
	}
	if fired == 0 {
		t.Fatal("tick: no heartbeat timer is armed")
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
