package dedup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

func TestNewRejects(t *testing.T) {
	s := backends[0].new(t).Store
	cases := map[string]struct {
		opts []any
		pkg  string
	}{
		"ZeroLease":      {[]any{idem.WithLease(0)}, "idem"},
		"SubMsLease":     {[]any{idem.WithLease(time.Microsecond)}, "idem"},
		"ZeroRetention":  {[]any{idem.WithRetention(0)}, "idem"},
		"NegRetention":   {[]any{idem.WithRetention(-time.Hour)}, "idem"},
		"NilLogger":      {[]any{idem.WithLogger(nil)}, "idem"},
		"NilTracer":      {[]any{idem.WithTracer(nil)}, "idem"},
		"LongScope":      {[]any{dedup.WithScope(strings.Repeat("s", store.MaxKeyLen))}, "dedup"},
		"NULInScope":     {[]any{dedup.WithScope("a\x00b")}, "dedup"},
		"InvalidUTF8Scp": {[]any{dedup.WithScope("\xff")}, "dedup"},
		"NilOption":      {[]any{dedup.Option(nil)}, "dedup"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := newDedup(s, c.opts...)
			assert.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, d)
			assert.True(t, strings.HasPrefix(err.Error(), c.pkg+": new: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "new:"), "each layer once: %s", err)
		})
	}
	d, err := dedup.New(nil)
	assert.ErrorIs(t, err, store.ErrInvalid, "a nil engine")
	assert.Nil(t, d)
	d, err = newDedup(s, idem.WithLease(idem.MinLease))
	require.NoError(t, err, "MinLease is accepted")
	require.NotNil(t, d)
}

func TestProcessRejects(t *testing.T) {
	subj := backends[0].new(t)
	d := newDeduper(t, subj.Store, dedup.WithScope("src"))
	called := false
	fn := func(context.Context) error { called = true; return nil }
	cases := map[string]struct {
		id string
		fn func(context.Context) error
	}{
		"EmptyID": {"", fn},
		"NilFn":   {"evt", nil},
		"LongID":  {strings.Repeat("x", store.MaxKeyLen), fn},
		"NULInID": {"a\x00b", fn},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			for _, process := range []func(context.Context, string, func(context.Context) error) (dedup.Outcome, error){
				d.Process, d.ProcessTx,
			} {
				out, err := process(t.Context(), c.id, c.fn)
				assert.Equal(t, dedup.Failed, out)
				assert.ErrorIs(t, err, store.ErrInvalid)
			}
		})
	}
	assert.False(t, called)
	//lint:ignore SA1012 a nil context is what is tested
	out, err := d.Process(nil, "evt", fn)
	assert.Equal(t, dedup.Failed, out)
	assert.ErrorIs(t, err, store.ErrInvalid)
}

// TestMismatch: a key written by something other than dedup (another
// fingerprint) is reported, not overwritten or taken for a duplicate.
func TestMismatch(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, subj storetest.Subject) {
		d := newDeduper(t, subj.Store)
		_, err := subj.Store.Claim(t.Context(), keyOf(d, "evt_foreign"), "someone-else", store.NewToken(), time.Minute)
		require.NoError(t, err)
		out, err := d.Process(t.Context(), "evt_foreign", func(context.Context) error {
			t.Error("fn called on a foreign key")
			return nil
		})
		assert.Equal(t, dedup.Failed, out)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "did not write")
	})
}

func TestOutcome(t *testing.T) {
	cases := []struct {
		o   dedup.Outcome
		s   string
		act dedup.Action
	}{
		{dedup.Processed, "processed", dedup.Ack},
		{dedup.Duplicate, "duplicate", dedup.Ack},
		{dedup.InFlight, "in flight", dedup.Retry},
		{dedup.Failed, "failed", dedup.Retry},
		{dedup.Mismatch, "mismatch", dedup.DeadLetter},
		{0, "Outcome(0)", dedup.Retry},
		{9, "Outcome(9)", dedup.Retry},
	}
	for _, c := range cases {
		assert.Equal(t, c.s, c.o.String())
		assert.Equal(t, c.act, c.o.Action(), c.s)
	}
	assert.Equal(t, "dead-letter", dedup.DeadLetter.String())
}

func TestProcessTxNeedsTransactor(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { _ = s.Close() })
	d := newDeduper(t, s)
	called := false
	out, err := d.ProcessTx(t.Context(), "evt", func(context.Context) error { called = true; return nil })
	assert.Equal(t, dedup.Failed, out)
	assert.ErrorIs(t, err, store.ErrInvalid)
	assert.Contains(t, err.Error(), "does not implement store.Transactor")
	assert.False(t, called)
}
