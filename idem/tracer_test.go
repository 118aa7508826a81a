package idem_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

type ctxKey string

// spanTracer records what it sees and puts its name in the context, as a
// span would be.
type spanTracer struct {
	name string
	mu   sync.Mutex
	log  *[]string
	ends []idem.RunEnd
	ctx  []context.Context
}

func (s *spanTracer) add(e string) {
	s.mu.Lock()
	*s.log = append(*s.log, s.name+":"+e)
	s.mu.Unlock()
}

func (s *spanTracer) TraceRunStart(ctx context.Context, _ idem.RunStart) context.Context {
	s.add("start")
	return context.WithValue(ctx, ctxKey(s.name), s.name)
}

func (s *spanTracer) TraceRunEnd(ctx context.Context, end idem.RunEnd) {
	s.add("end")
	s.mu.Lock()
	s.ends, s.ctx = append(s.ends, end), append(s.ctx, ctx)
	s.mu.Unlock()
}

func (s *spanTracer) TraceEvent(ctx context.Context, ev idem.Event) {
	if ctx.Value(ctxKey(s.name)) == nil {
		s.add("event without the run's context")
	}
}

// TestTracerContextReachesWork: the context TraceRunStart returns is the
// one the work runs in and the one TraceRunEnd and TraceEvent get; several
// tracers nest in order, like deferred calls.
func TestTracerContextReachesWork(t *testing.T) {
	var log []string
	a, b := &spanTracer{name: "a", log: &log}, &spanTracer{name: "b", log: &log}
	e := newEngine(t, newMemory(t), idem.WithTracer(a), idem.WithTracer(b))
	k := key(t)
	_, err := e.Run(t.Context(), k, "", func(ctx context.Context) idem.Verdict {
		assert.Equal(t, "a", ctx.Value(ctxKey("a")))
		assert.Equal(t, "b", ctx.Value(ctxKey("b")), "the work runs in the tracers' context")
		return idem.Keep([]byte("ok")).WithStatus(201)
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"a:start", "b:start", "b:end", "a:end"}, log)
	require.Len(t, b.ends, 1)
	assert.Equal(t, "b", b.ctx[0].Value(ctxKey("b")))
	assert.Equal(t, store.Acquired, b.ends[0].Result.Outcome)
	assert.Equal(t, idem.SettleCompleted, b.ends[0].Result.Settle)
	assert.Equal(t, 201, b.ends[0].Status)
	assert.Equal(t, k, b.ends[0].Key)

	_, err = e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	require.NoError(t, err)
	assert.Equal(t, store.Completed, b.ends[1].Result.Outcome, "a replay ends too")
}

// TestTracerSeesPanic: a panicking work still ends its run, with
// ErrPanicked, and the panic goes on.
func TestTracerSeesPanic(t *testing.T) {
	var log []string
	tr := &spanTracer{name: "t", log: &log}
	e := newEngine(t, newMemory(t), idem.WithTracer(tr))
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_, _ = e.Run(t.Context(), key(t), "", func(context.Context) idem.Verdict { panic("boom") })
	}()
	require.Len(t, tr.ends, 1)
	assert.ErrorIs(t, tr.ends[0].Err, idem.ErrPanicked)
	assert.Equal(t, idem.SettleReleased, tr.ends[0].Result.Settle)
}
