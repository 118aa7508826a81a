package dedup_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/redacttest"
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

// scriptDedup processes: an id whose Complete is retried, its duplicate, a
// payload mismatch, an id in flight, a failing fn whose release fails, a
// store that is down, a lost lease, a nil fn and ProcessTx on a store without transactions. It returns the log and the
// text of every error returned.
func scriptDedup(t *testing.T, opts ...any) (logs string, errs []string) {
	t.Helper()
	clock := storetest.NewManualClock(time.Now())
	mem, err := memory.New(memory.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { mem.Close() })
	id := func(name string) string { return rawID + "-" + name }
	var d *dedup.Deduper
	q := &redacttest.QuotingStore{Err: errDown, Store: mem, Fail: func(op, key string, n int) bool {
		switch {
		case key == keyOf(d, id("done")) && op == "complete":
			return n <= 2
		case key == keyOf(d, id("fail")) && op == "release":
			return true
		case key == keyOf(d, id("down")) && op == "claim":
			return true
		}
		return false
	}}
	var buf redacttest.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d = newDeduper(t, q, append([]any{dedup.WithScope(rawTenant), idem.WithLogger(logger), idem.WithLease(200 * time.Millisecond)}, opts...)...)
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
		c, err := mem.Claim(ctx, keyOf(d, id("lost")), "", store.NewToken(), time.Hour)
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
	logs, errs := scriptDedup(t, idem.WithKeyRedactor(keyer.RawKeys()))
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
	_, err := newDedup(s, idem.WithKeyRedactor(nil))
	require.ErrorIs(t, err, store.ErrInvalid)
}
