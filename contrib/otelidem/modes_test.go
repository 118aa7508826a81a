package otelidem_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

// TestTransactionalMode: in transactional mode the claim and the Complete
// run inside the transaction and the settle is reported after it; the
// counts and the in-flight gauge come out the same.
func TestTransactionalMode(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, otelidem.WithBackend(otelidem.Backend(s)))
	e := newEngine(t, h, s)
	ctx := context.Background()
	keep := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }
	for _, k := range []string{"a", "b", "a", "a"} {
		if _, err := e.Run(ctx, k, "fp", keep, idem.InTx()); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := e.Run(ctx, "c", "fp", func(context.Context) idem.Verdict { return idem.Discard("declined") }, idem.InTx()); err != nil || r.Settle != idem.SettleReleased {
		t.Fatalf("discard: %+v %v", r, err)
	}
	ms := h.metrics(t)
	for o, want := range map[string]int64{"acquired": 3, "replayed": 2} {
		if got := sum(t, ms, "idem.claims", outcome(o)); got != want {
			t.Errorf("idem.claims{%s} = %d, want %d", o, got, want)
		}
	}
	for o, want := range map[string]int64{"completed": 2, "released": 1} {
		if got := sum(t, ms, "idem.settles", outcome(o)); got != want {
			t.Errorf("idem.settles{%s} = %d, want %d", o, got, want)
		}
	}
	if n := sum(t, ms, "idem.inflight"); n != 0 {
		t.Errorf("in flight %d", n)
	}
	if n, _ := hist(t, ms, "idem.work.duration"); n != 3 {
		t.Errorf("work durations %d, want 3", n)
	}
	if n, _ := hist(t, ms, "idem.store.duration", otelidem.AttrOp.String("tx"), otelidem.AttrStore.String("sqlite")); n != 5 {
		t.Errorf("tx calls timed %d, want 5", n)
	}
}

// TestLeaseLostCountsOnce: the store's lease lapses while the work runs and
// another claim takes the key; the heartbeat reports the loss and the settle
// reports it again. The run counts once as lease_lost and leaves nothing in
// flight.
func TestLeaseLostCountsOnce(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := newHarness(t)
	e := newEngine(t, h, st, idem.WithLease(40*time.Millisecond))

	entered := make(chan struct{})
	type result struct {
		r   idem.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.Run(context.Background(), "k", "fp", func(ctx context.Context) idem.Verdict {
			close(entered)
			<-ctx.Done() // cancelled when the lease is lost
			return idem.Keep([]byte("late"))
		})
		done <- result{r, err}
	}()
	<-entered
	// The store's clock jumps past the lease; another claim takes the key.
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if c, err := st.Claim(context.Background(), "k", "fp", store.NewToken(), time.Hour); err != nil || c.Outcome != store.Acquired {
		t.Fatalf("takeover: %v %v", c.Outcome, err)
	}
	res := <-done
	if !errors.Is(res.err, store.ErrLeaseLost) || res.r.Settle != idem.SettleLeaseLost {
		t.Fatalf("run: %+v %v, want a lost lease", res.r, res.err)
	}
	ms := h.metrics(t)
	if n := sum(t, ms, "idem.settles", outcome(otelidem.OutcomeLeaseLost)); n != 1 {
		t.Errorf("idem.settles{lease_lost} = %d, want 1", n)
	}
	if n := sum(t, ms, "idem.settles"); n != 1 {
		t.Errorf("idem.settles = %d in all, want 1", n)
	}
	if n := sum(t, ms, "idem.inflight"); n != 0 {
		t.Errorf("in flight %d after the run ended", n)
	}
}
