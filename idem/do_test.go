package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

func TestDoRunsOnce(t *testing.T) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, s, idem.WithWait(10*time.Second))
			k := key(t)
			var runs atomic.Int32
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					v, err := idem.Do(context.Background(), e, k, func(context.Context) (map[string]int, error) {
						runs.Add(1)
						time.Sleep(10 * time.Millisecond) // widen the race window
						return map[string]int{"n": 7}, nil
					})
					assert.NoError(t, err)
					assert.Equal(t, 7, v["n"])
				})
			}
			wg.Wait()
			assert.EqualValues(t, 1, runs.Load())
		})
	}
}

func TestDoErrorReleases(t *testing.T) {
	e := newEngine(t, newMemory(t))
	boom := errors.New("provider down")
	_, err := idem.Do(t.Context(), e, "k", func(context.Context) (int, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
	v, err := idem.Do(t.Context(), e, "k", func(context.Context) (int, error) { return 5, nil })
	require.NoError(t, err)
	assert.Equal(t, 5, v, "the retry ran")
}

func TestDoScopeSeparates(t *testing.T) {
	e := newEngine(t, newMemory(t))
	var runs atomic.Int32
	fn := func(context.Context) (int, error) { return int(runs.Add(1)), nil }
	a, _ := idem.Do(t.Context(), e, "k", fn, idem.WithScope("alice"))
	b, _ := idem.Do(t.Context(), e, "k", fn, idem.WithScope("bob"))
	a2, _ := idem.Do(t.Context(), e, "k", fn, idem.WithScope("alice"))
	assert.Equal(t, []int{1, 2, 1}, []int{a, b, a2})
	assert.NotEqual(t, mustDoKey(t, "b:c", "a"), mustDoKey(t, "c", "a:b"))
}

func TestDoTooLargeNotKept(t *testing.T) {
	e := newEngine(t, newMemory(t))
	var runs atomic.Int32
	fn := func(context.Context) (string, error) { runs.Add(1); return strings.Repeat("x", 100), nil }
	v, err := idem.Do(t.Context(), e, "k", fn, idem.WithMaxResult(50))
	require.ErrorIs(t, err, idem.ErrNotKept, "the first caller is told what a retry will be told")
	assert.Len(t, v, 100, "the first caller gets its result")
	_, err = idem.Do(t.Context(), e, "k", fn, idem.WithMaxResult(50))
	require.ErrorIs(t, err, idem.ErrNotKept)
	assert.EqualValues(t, 1, runs.Load(), "never a second run")
}

func TestDoInProgressAndRejects(t *testing.T) {
	e := newEngine(t, newMemory(t), idem.WithWait(0))
	release, done := holdKey(t, e, mustDoKey(t, "k"))
	_, err := idem.Do(t.Context(), e, "k", func(context.Context) (int, error) { t.Error("ran"); return 0, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
	close(release)
	<-done

	_, err = idem.Do(t.Context(), e, "", func(context.Context) (int, error) { return 0, nil })
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = idem.Do(t.Context(), e, "k", func(context.Context) (int, error) { return 0, nil }, idem.WithCodec(nil))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = idem.Do[int](t.Context(), e, "k", nil)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = idem.Do(t.Context(), e, "k", func(context.Context) (int, error) { return 0, nil }, nil)
	require.ErrorIs(t, err, store.ErrInvalid, "a nil option")
}

func mustDoKey(t *testing.T, key string, scope ...string) string {
	t.Helper()
	k, err := idem.DoKey(key, scope...)
	require.NoError(t, err)
	return k
}

// TestDoFirstCallAsReplay: the first call returns what a replay will, the
// result as the codec keeps it: Do[any] gives float64 both times, and a
// result the codec cannot carry fails at once, not on a retry.
func TestDoFirstCallAsReplay(t *testing.T) {
	e := newEngine(t, newMemory(t))
	fn := func(context.Context) (any, error) { return map[string]any{"n": 1}, nil }
	first, err := idem.Do(t.Context(), e, "k-any", fn)
	require.NoError(t, err)
	again, err := idem.Do(t.Context(), e, "k-any", fn)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": float64(1)}, first)
	assert.Equal(t, first, again)

	type hidden struct {
		Shown  int
		hidden int
	}
	h, err := idem.Do(t.Context(), e, "k-hidden", func(context.Context) (hidden, error) { return hidden{1, 2}, nil })
	require.NoError(t, err)
	assert.Equal(t, hidden{Shown: 1}, h, "an unexported field is gone on the first call as on a replay")

	var runs int
	_, err = idem.Do(t.Context(), e, "k-chan", func(context.Context) (chan int, error) { runs++; return make(chan int), nil })
	require.ErrorIs(t, err, idem.ErrNotKept, "the codec cannot carry a channel: the first call says so")
	_, err = idem.Do(t.Context(), e, "k-chan", func(context.Context) (chan int, error) { runs++; return make(chan int), nil })
	require.ErrorIs(t, err, idem.ErrNotKept)
	assert.Equal(t, 1, runs, "done once; never run again")
}
