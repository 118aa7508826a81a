package idem_test

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

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/redacttest"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// The raw parts of the keys the scripted run uses: a tenant scope and a
// client-chosen key, neither of which may reach a log line or an error text.
const (
	rawTenant = "tenant-acme-7Qx"
	rawClient = "client-key-Zk41"
)

// scripted is what a scripted run wrote: every log line, every returned
// error's text, every event.
type scripted struct {
	logs   string
	lines  int
	errs   []string
	events []idem.Event
	keys   []string
}

// runScript drives an engine through claim, retried complete, replay, 409,
// 422, release (failing), a failed claim, a lost lease and Do's errors, all
// with keys made of rawTenant and rawClient.
func runScript(t *testing.T, opts ...idem.Option) scripted {
	t.Helper()
	var out scripted
	k := func(name string) string {
		s := rawTenant + ":" + rawClient + ":" + name
		out.keys = append(out.keys, s)
		return s
	}
	kDone, kBusy, kRelease, kDown, kLost := k("done"), k("busy"), k("release"), k("down"), k("lost")
	mem, clock := newManualMemory(t)
	q := &redacttest.QuotingStore{Err: errBlip, Store: mem, Fail: func(op, key string, n int) bool {
		switch {
		case key == kDone && op == "complete":
			return n <= 2 // retried, logged
		case key == kRelease && op == "release":
			return true // fails for good: logged and returned
		case key == kDown && op == "claim":
			return true
		}
		return false
	}}
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var evMu sync.Mutex
	obs := func(ev idem.Event) { evMu.Lock(); out.events = append(out.events, ev); evMu.Unlock() }
	e := newEngine(t, q, append([]idem.Option{idem.WithLease(200 * time.Millisecond), idem.WithWait(0), idem.WithLogger(logger), idem.WithTracer(events(obs))}, opts...)...)
	ctx := t.Context()
	note := func(err error) {
		if err != nil {
			out.errs = append(out.errs, err.Error())
		}
	}
	keep := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }

	res, err := e.Run(ctx, kDone, "fp1", keep)
	require.NoError(t, err)
	require.Equal(t, idem.SettleCompleted, res.Settle)
	res, err = e.Run(ctx, kDone, "fp1", keep)
	require.NoError(t, err)
	require.True(t, res.Replay())
	res, err = e.Run(ctx, kDone, "fp2", keep)
	require.NoError(t, err)
	require.Equal(t, store.Mismatch, res.Outcome)

	release, done := holdKey(t, e, kBusy)
	res, err = e.Run(ctx, kBusy, "", keep)
	require.NoError(t, err)
	require.Equal(t, store.InProgress, res.Outcome)
	_, err = idem.Do(ctx, e, rawClient+":do", func(context.Context) (int, error) { return 1, nil }, idem.WithScope(rawTenant))
	require.NoError(t, err)
	_, err = idem.Do(ctx, e, rawClient+":do", func(context.Context) (int, error) { return 2, nil }, idem.WithScope(rawTenant), idem.WithFingerprint("other"))
	require.ErrorIs(t, err, idem.ErrMismatch)
	note(err)
	close(release)
	<-done

	res, err = e.Run(ctx, kRelease, "", func(context.Context) idem.Verdict { return idem.Discard("declined") })
	require.Error(t, err)
	require.Equal(t, idem.SettleFailed, res.Settle)
	note(err)

	_, err = e.Run(ctx, kDown, "", keep)
	require.ErrorIs(t, err, idem.ErrUnavailable)
	require.ErrorIs(t, err, errBlip, "the store's error is still there for errors.Is")
	note(err)

	res, err = e.Run(ctx, kLost, "", func(wctx context.Context) idem.Verdict {
		clock.Advance(time.Hour) // the lease lapses in the store; another claim takes the key
		c, err := mem.Claim(ctx, kLost, "", store.NewToken(), time.Hour)
		require.NoError(t, err)
		require.Equal(t, store.Acquired, c.Outcome)
		<-wctx.Done()
		return idem.Keep([]byte("mine"))
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.Equal(t, idem.SettleLeaseLost, res.Settle)
	note(err)

	mu.Lock()
	out.logs = buf.String()
	mu.Unlock()
	out.lines = strings.Count(out.logs, "\n")
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestKeysRedactedByDefault(t *testing.T) {
	out := runScript(t)
	require.GreaterOrEqual(t, out.lines, 4, "the run logs the retried complete, the failed release and the lost lease:\n%s", out.logs)
	require.Len(t, out.errs, 4)
	for _, raw := range []string{rawTenant, rawClient} {
		assert.NotContains(t, out.logs, raw, "a log line carries a raw key part")
		for _, e := range out.errs {
			assert.NotContains(t, e, raw, "an error text carries a raw key part")
		}
	}
	red := keyer.DefaultRedactor()
	for _, k := range out.keys[:1] {
		assert.Contains(t, out.logs, red(k), "lines carry the key's hash, so they can be found together")
	}
	for _, e := range out.errs[1:] {
		assert.Contains(t, e, `"hmac:`, "errors name the key by its hash")
	}
	// Observers get the raw key; the errors in events are redacted.
	sawErr := false
	for _, ev := range out.events {
		assert.Contains(t, ev.Key, rawTenant, "observers get the raw key")
		if ev.Err != nil {
			sawErr = true
			assert.NotContains(t, ev.Err.Error(), rawClient)
		}
	}
	assert.True(t, sawErr, "the run has store errors in its events")
}

func TestKeysRawWhenChosen(t *testing.T) {
	out := runScript(t, idem.WithKeyRedactor(keyer.RawKeys()))
	assert.Contains(t, out.logs, out.keys[0])
	assert.Contains(t, out.logs, `test: complete: key \"`+out.keys[0]+`\"`, "the store's error is logged as it is")
	require.Len(t, out.errs, 4)
	for _, e := range out.errs[1:] {
		assert.Contains(t, e, rawClient)
	}
}

func TestKeysOmitted(t *testing.T) {
	out := runScript(t, idem.WithKeyRedactor(keyer.OmitKeys()))
	require.GreaterOrEqual(t, out.lines, 4)
	for _, raw := range []string{rawTenant, rawClient} {
		assert.NotContains(t, out.logs, raw)
		for _, e := range out.errs {
			assert.NotContains(t, e, raw)
		}
	}
}

func TestKeyRedactorNilRejected(t *testing.T) {
	_, err := idem.New(newMemory(t), idem.WithKeyRedactor(nil))
	require.ErrorIs(t, err, store.ErrInvalid)
}

// A short key is replaced where it stands alone, not inside longer words.
func TestKeyRedactedInStoreErrorText(t *testing.T) {
	const k = "ab"
	q := &redacttest.QuotingStore{Err: errBlip, Store: newMemory(t), Fail: func(op, _ string, _ int) bool { return op == "claim" }}
	e := newEngine(t, q, idem.WithKeyRedactor(func(string) string { return "H" }))
	_, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep(nil) })
	require.Error(t, err)
	assert.Equal(t, `idem: claim "H": idem: store unavailable: test: claim: key "H": test: store blip`, err.Error())
	assert.True(t, errors.Is(err, errBlip))
}

// quotingTx fails every transaction after fn returned with an error that
// quotes the key, as a driver's error might.
type quotingTx struct {
	store.Store
	tx  store.Transactor
	key string
}

func (q quotingTx) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return q.tx.InTx(ctx, func(ctx context.Context, s store.Store) error {
		if err := fn(ctx, s); err != nil {
			return err
		}
		return fmt.Errorf("test: commit of %q: reply lost", q.key)
	})
}

// Transactional mode: the failed commit's log line and error name the key
// only hashed.
func TestKeysRedactedInTransactionalMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []idem.Option
		raw  bool
	}{{"Default", nil, false}, {"RawKeys", []idem.Option{idem.WithKeyRedactor(keyer.RawKeys())}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			forEachTx(t, func(t *testing.T, b txBackend) {
				k := rawTenant + ":" + rawClient + ":" + t.Name()
				var buf bytes.Buffer
				var mu sync.Mutex
				logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
				e := newEngine(t, quotingTx{Store: b.s, tx: b.s.(store.Transactor), key: k},
					append([]idem.Option{idem.WithLogger(logger)}, tc.opts...)...)
				res, err := e.Run(t.Context(), k, "", func(context.Context) idem.Verdict { return idem.Keep([]byte("maybe")) }, idem.InTx())
				require.ErrorIs(t, err, idem.ErrNotRecorded)
				require.Equal(t, idem.SettleUnknown, res.Settle)
				mu.Lock()
				logs := buf.String()
				mu.Unlock()
				require.Contains(t, logs, "transaction failed after the work ran")
				for _, text := range []string{logs, err.Error()} {
					if tc.raw {
						assert.Contains(t, text, rawClient)
					} else {
						assert.NotContains(t, text, rawClient)
						assert.NotContains(t, text, rawTenant)
						assert.Contains(t, text, keyer.DefaultRedactor()(k))
					}
				}
			})
		})
	}
}
