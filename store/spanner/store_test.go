package spanner

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sp "cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idemkit/store"
)

func TestNewRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"nil option", []Option{nil}, "option 0 is nil"},
		{"empty table", []Option{WithTable("")}, "table name"},
		{"table with a quote", []Option{WithTable("a`b")}, "table name"},
		{"table starting with a digit", []Option{WithTable("1t")}, "table name"},
		{"table too long", []Option{WithTable("t" + strings.Repeat("x", 128))}, "table name"},
		{"purge batch 0", []Option{WithPurgeBatch(0)}, "purge batch"},
		{"purge batch too large", []Option{WithPurgeBatch(10001)}, "purge batch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A client that never connects: New fails before using it.
			_, err := New(&sp.Client{}, c.opts...)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want store.ErrInvalid saying %q", err, c.want)
			}
		})
	}
	if _, err := New(nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("New(nil): %v, want store.ErrInvalid", err)
	}
}

// TestCompleteRefusesTooLarge: a response above MaxResponse is ErrInvalid
// and leaves the claim as it was; MaxResponse itself is stored.
func TestCompleteRefusesTooLarge(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	tok := store.NewToken()
	if _, err := s.Claim(ctx, "big", "fp", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	err := s.Complete(ctx, "big", tok, make([]byte, MaxResponse+1), time.Minute)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Complete of %d bytes: %v, want store.ErrInvalid", MaxResponse+1, err)
	}
	r, err := s.Get(ctx, "big")
	if err != nil || r.Status != store.StatusInProgress || r.Token != tok {
		t.Fatalf("after the refused Complete: %+v, %v; want still in progress", r, err)
	}
	if err := s.Complete(ctx, "big", tok, make([]byte, MaxResponse), time.Minute); err != nil {
		t.Fatalf("Complete of exactly MaxResponse: %v", err)
	}
	if r, err := s.Get(ctx, "big"); err != nil || len(r.Response) != MaxResponse {
		t.Fatalf("Get after Complete of MaxResponse: %d bytes, %v", len(r.Response), err)
	}
}

// TestAbortIsRetriedNotLeaseLost: an attempt of Complete that Spanner
// aborts, or whose transaction the emulator drops because another began on
// the same session, is retried inside the call: Complete returns nil and
// the record is completed, never ErrLeaseLost.
func TestAbortIsRetriedNotLeaseLost(t *testing.T) {
	_, client := testDB(t)
	for _, c := range []struct {
		name  string
		fault func(ctx context.Context) error
	}{
		{"aborted", func(context.Context) error {
			return sp.ToSpannerError(status.Error(codes.Aborted, "test: aborted"))
		}},
		{"dropped by a newer transaction", func(context.Context) error {
			// Another transaction on the client's session begins and
			// commits while this one is open: the emulator drops this one.
			_, err := client.ReadWriteTransaction(context.Background(), func(ctx context.Context, tx *sp.ReadWriteTransaction) error {
				return tx.Query(ctx, sp.Statement{SQL: "SELECT 1"}).Do(func(*sp.Row) error { return nil })
			})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStoreOn(t, client)
			ctx := context.Background()
			tok := store.NewToken()
			if _, err := s.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int32
			s.afterRead = func(ctx context.Context) error {
				if calls.Add(1) == 1 {
					return c.fault(ctx)
				}
				return nil
			}
			err := s.Complete(ctx, "k", tok, []byte("done"), time.Minute)
			s.afterRead = nil
			if err != nil {
				t.Fatalf("Complete: %v, want nil (the abort retried inside the call)", err)
			}
			if n := calls.Load(); n < 2 {
				t.Fatalf("the transaction ran %d times, want at least 2", n)
			}
			r, err := s.Get(ctx, "k")
			if err != nil || r.Status != store.StatusCompleted || string(r.Response) != "done" {
				t.Fatalf("Get: %+v, %v; want completed with \"done\"", r, err)
			}
		})
	}
}

// TestInTxRunsFnAgainAfterAbort: when Spanner aborts InTx's transaction
// after fn claimed and wrote its effect, fn runs again in a new
// transaction, and only the attempt that commits leaves its effect and
// response.
func TestInTxRunsFnAgainAfterAbort(t *testing.T) {
	s := newTestStore(t)
	sub := subject(s)
	ctx := context.Background()
	tok := store.NewToken()
	var attempts int
	err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		attempts++
		c, err := st.Claim(ctx, "k", "fp", tok, time.Minute)
		if err != nil {
			return err
		}
		if c.Outcome != store.Acquired {
			return errors.New("claim: " + c.Outcome.String())
		}
		if err := sub.Effect(ctx, "k"); err != nil {
			return err
		}
		if err := st.Complete(ctx, "k", tok, []byte{byte('0' + attempts)}, time.Minute); err != nil {
			return err
		}
		if attempts == 1 {
			return sp.ToSpannerError(status.Error(codes.Aborted, "test: aborted after the effect"))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	if attempts != 2 {
		t.Fatalf("fn ran %d times, want 2", attempts)
	}
	if n, err := sub.CountEffects(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("effects: %d, %v; want 1 (the aborted attempt's discarded)", n, err)
	}
	r, err := s.Get(ctx, "k")
	if err != nil || string(r.Response) != "2" {
		t.Fatalf("Get: %+v, %v; want the second attempt's response", r, err)
	}
}

// TestInTxNested: Spanner has no nested transactions; InTx in fn is
// ErrInvalid and the outer transaction goes on.
func TestInTxNested(t *testing.T) {
	s := newTestStore(t)
	var inner error
	err := s.InTx(context.Background(), func(ctx context.Context, st store.Store) error {
		inner = s.InTx(ctx, func(context.Context, store.Store) error { return nil })
		return nil
	})
	if err != nil || !errors.Is(inner, store.ErrInvalid) {
		t.Fatalf("outer %v, inner %v; want nil and store.ErrInvalid", err, inner)
	}
}
