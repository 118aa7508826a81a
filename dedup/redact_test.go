package dedup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// The raw parts of the scripted run: the deduper's scope (a tenant) and the
// ids. Neither may reach a log line or an error text.
const (
	rawTenant = "tenant-acme-7Qx"
	rawID     = "evt-Zk41"
)

var errDown = errors.New("test: store down")

// quotingStore makes chosen calls fail with an error quoting the key, as
// the Redis and memory backends' errors do.
type quotingStore struct {
	store.Store
	fail func(op, key string, n int) bool
	mu   sync.Mutex
	n    map[string]int
}

func (q *quotingStore) failed(op, key string) error {
	q.mu.Lock()
	if q.n == nil {
		q.n = map[string]int{}
	}
	q.n[op+key]++
	n := q.n[op+key]
	q.mu.Unlock()
	if q.fail(op, key, n) {
		return fmt.Errorf("test: %s: key %q: %w", op, key, errDown)
	}
	return nil
}

func (q *quotingStore) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	if err := q.failed("claim", key); err != nil {
		return store.Claim{}, err
	}
	return q.Store.Claim(ctx, key, fp, tok, lease)
}

func (q *quotingStore) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	if err := q.failed("complete", key); err != nil {
		return err
	}
	return q.Store.Complete(ctx, key, tok, resp, retention)
}

func (q *quotingStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := q.failed("release", key); err != nil {
		return err
	}
	return q.Store.Release(ctx, key, tok)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scriptDedup processes: an id whose Complete is retried, its duplicate, a
// payload mismatch, an id in flight, a failing fn whose release fails, a
// store that is down, a lost lease, a nil fn and ProcessTx on a store without transactions. It returns the log and the
// text of every error returned.
func scriptDedup(t *testing.T, opts ...dedup.Option) (logs string, errs []string) {
	t.Helper()
	clock := storetest.NewManualClock(time.Now())
	mem, err := memory.New(memory.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { mem.Close() })
	id := func(name string) string { return rawID + "-" + name }
	var d *dedup.Deduper
	q := &quotingStore{Store: mem, fail: func(op, key string, n int) bool {
		switch {
		case key == d.Key(id("done")) && op == "complete":
			return n <= 2
		case key == d.Key(id("fail")) && op == "release":
			return true
		case key == d.Key(id("down")) && op == "claim":
			return true
		}
		return false
	}}
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d = newDeduper(t, q, append([]dedup.Option{dedup.WithScope(rawTenant), dedup.WithLogger(logger), dedup.WithLease(200 * time.Millisecond)}, opts...)...)
	ctx := t.Context()
	ok := func(context.Context) error { return nil }
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	out, err := d.Process(ctx, id("done"), ok)
	require.NoError(t, err)
	require.Equal(t, dedup.Processed, out)
	out, err = d.Process(ctx, id("done"), ok)
	require.NoError(t, err)
	require.Equal(t, dedup.Duplicate, out)
	_, err = d.ProcessWith(ctx, id("pay"), dedup.Fingerprint([]byte("a")), ok)
	require.NoError(t, err)
	out, err = d.ProcessWith(ctx, id("pay"), dedup.Fingerprint([]byte("b")), ok)
	require.NoError(t, err)
	require.Equal(t, dedup.Mismatch, out)

	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, err := d.Process(context.Background(), id("busy"), func(context.Context) error { close(started); <-release; return nil })
		done <- err
	}()
	<-started
	out, err = d.Process(ctx, id("busy"), ok)
	require.NoError(t, err)
	require.Equal(t, dedup.InFlight, out)
	close(release)
	require.NoError(t, <-done)

	out, err = d.Process(ctx, id("fail"), func(context.Context) error { return errors.New("handler failed") })
	require.Equal(t, dedup.Failed, out)
	require.Error(t, err)
	note(err)
	_, err = d.Process(ctx, id("down"), ok)
	require.ErrorIs(t, err, errDown)
	note(err)
	_, err = d.Process(ctx, id("lost"), func(wctx context.Context) error {
		clock.Advance(time.Hour) // the lease lapses; another claim takes the key
		c, err := mem.Claim(ctx, d.Key(id("lost")), "", store.NewToken(), time.Hour)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		<-wctx.Done()
		return nil
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	note(err)
	_, err = d.Process(ctx, id("nil"), nil)
	require.ErrorIs(t, err, store.ErrInvalid)
	note(err)
	_, err = d.ProcessTx(ctx, id("tx"), ok) // the store is no Transactor
	require.ErrorIs(t, err, store.ErrInvalid)
	note(err)
	return buf.String(), errs
}

func TestLogsAndErrorsCarryNoRawIDByDefault(t *testing.T) {
	logs, errs := scriptDedup(t)
	require.GreaterOrEqual(t, strings.Count(logs, "\n"), 7, "duplicate, mismatch, in flight, retried complete, failed release, lost lease:\n%s", logs)
	require.Len(t, errs, 5)
	for _, raw := range []string{rawTenant, rawID} {
		assert.NotContains(t, logs, raw, "a log line carries a raw id or scope")
		for _, e := range errs {
			assert.NotContains(t, e, raw, "an error text carries a raw id or scope")
		}
	}
	red := keyer.DefaultRedactor()
	assert.Contains(t, logs, `"id":"`+red(rawID+"-done")+`"`)
	assert.Contains(t, logs, `"scope":"`+red(rawTenant)+`"`)
}

func TestLogsAndErrorsCarryRawIDsWhenChosen(t *testing.T) {
	logs, errs := scriptDedup(t, dedup.WithKeyRedactor(keyer.RawKeys()))
	assert.Contains(t, logs, `"id":"`+rawID+`-done"`)
	assert.Contains(t, logs, `"scope":"`+rawTenant+`"`)
	require.Len(t, errs, 5)
	for _, e := range errs {
		assert.Contains(t, e, rawID)
	}
}

func TestKeyRedactorNil(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	_, err := dedup.New(s, dedup.WithKeyRedactor(nil))
	require.ErrorIs(t, err, store.ErrInvalid)
}
