package dedup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

func TestNewRejects(t *testing.T) {
	s := backends[0].new(t).Store
	cases := map[string]struct {
		s    store.Store
		opts []dedup.Option
	}{
		"NilStore":       {nil, nil},
		"ZeroLease":      {s, []dedup.Option{dedup.WithLease(0)}},
		"SubMsLease":     {s, []dedup.Option{dedup.WithLease(time.Microsecond)}},
		"ZeroRetention":  {s, []dedup.Option{dedup.WithRetention(0)}},
		"NegRetention":   {s, []dedup.Option{dedup.WithRetention(-time.Hour)}},
		"LongScope":      {s, []dedup.Option{dedup.WithScope(strings.Repeat("s", store.MaxKeyLen))}},
		"NULInScope":     {s, []dedup.Option{dedup.WithScope("a\x00b")}},
		"InvalidUTF8Scp": {s, []dedup.Option{dedup.WithScope("\xff")}},
		"NilLogger":      {s, []dedup.Option{dedup.WithLogger(nil)}},
		"NilObserver":    {s, []dedup.Option{dedup.WithObserver(nil)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := dedup.New(c.s, c.opts...)
			assert.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, d)
			assert.True(t, strings.HasPrefix(err.Error(), "dedup: new: "), err.Error())
		})
	}
	d, err := dedup.New(s, dedup.WithLease(dedup.MinLease))
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
		_, err := subj.Store.Claim(t.Context(), d.Key("evt_foreign"), "someone-else", store.NewToken(), time.Minute)
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
		ack bool
	}{
		{dedup.Processed, "processed", true},
		{dedup.Duplicate, "duplicate", true},
		{dedup.InFlight, "in flight", false},
		{dedup.Failed, "failed", false},
		{0, "Outcome(0)", false},
		{9, "Outcome(9)", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.s, c.o.String())
		assert.Equal(t, c.ack, c.o.Ack(), c.s)
	}
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
