package otelidem_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

func TestPurgeObserverCountsDeletedRecords(t *testing.T) {
	h := newHarness(t, otelidem.WithBackend("memory"))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock = func() time.Time { return now }
	s, err := memory.New(memory.WithClock(func() time.Time { return clock() }), memory.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		tok := store.NewToken()
		if _, err := s.Claim(ctx, k, "fp", tok, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, k, tok, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	j, err := purge.New(s, purge.WithObserver(h.tel.PurgeObserver()), purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	j.Once(ctx) // nothing expired yet
	now = now.Add(2 * time.Hour)
	if r := j.Once(ctx); r.Deleted != 3 {
		t.Fatalf("deleted %d, want 3", r.Deleted)
	}
	// A failed run counts as an error and adds what it deleted.
	failing, err := purge.New(purgerFunc(func(context.Context) (int64, error) { return 2, errors.New("boom") }),
		purge.WithObserver(h.tel.PurgeObserver()), purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	failing.Once(ctx)

	ms := h.metrics(t)
	if n := sum(t, ms, "idem.purge.deleted", otelidem.AttrStore.String("memory")); n != 5 {
		t.Errorf("idem.purge.deleted = %d, want 5", n)
	}
	if n := sum(t, ms, "idem.purge.runs", otelidem.AttrResult.String("ok")); n != 2 {
		t.Errorf("idem.purge.runs{ok} = %d, want 2", n)
	}
	if n := sum(t, ms, "idem.purge.runs", otelidem.AttrResult.String("error")); n != 1 {
		t.Errorf("idem.purge.runs{error} = %d, want 1", n)
	}
	if n, _ := hist(t, ms, "idem.purge.duration"); n != 3 {
		t.Errorf("idem.purge.duration has %d points, want 3", n)
	}
}

type purgerFunc func(context.Context) (int64, error)

func (f purgerFunc) Purge(ctx context.Context) (int64, error) { return f(ctx) }
