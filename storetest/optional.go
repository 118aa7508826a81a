package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

var purgerCases = []testCase{
	{"RemovesOnlyExpired", func(e *env) {
		p := e.purger()
		tok := store.NewToken()
		e.claimWant("completed-short", "fp", tok, long, store.Acquired)
		e.mustComplete("completed-short", tok, []byte("r"), e.short())
		e.claimWant("lease-short", "fp", store.NewToken(), e.short(), store.Acquired)
		keep := store.NewToken()
		e.claimWant("completed-long", "fp", keep, long, store.Acquired)
		e.mustComplete("completed-long", keep, []byte("kept"), long)
		e.claimWant("lease-long", "fp", keep, long, store.Acquired)
		e.lapse(e.short())
		n, err := p.Purge(e.ctx)
		if err != nil {
			e.Fatalf("Purge: %v", err)
		}
		if n != 1 {
			e.Errorf("Purge deleted %d records, want 1: the one past its retention (a lapsed lease is kept store.LapsedKept)", n)
		}
		// The lapsed lease is kept, as absent: the takeover counts it.
		c := e.claimWant("lease-short", "fp", store.NewToken(), long, store.Acquired)
		e.wantAttempt("the takeover of the lapsed lease Purge kept", c.Record, 2)
		e.wantCompleted("completed-long", "fp", keep, []byte("kept"))
		e.wantInProgress("lease-long", "fp", keep)
		if n, err := p.Purge(e.ctx); err != nil || n != 0 {
			e.Errorf("second Purge = %d, %v; want 0, nil", n, err)
		}
	}},
	{"RenewedLeaseKept", func(e *env) {
		// A renewal moves the record's purge deadline with its lease:
		// Purge after the first lease would have ended, but before the
		// renewed one ends, deletes nothing.
		p := e.purger()
		tok := store.NewToken()
		lease := 2 * e.short()
		e.renewedPastFirstLease("k", tok, lease)
		n, err := p.Purge(e.ctx)
		if err != nil {
			e.Fatalf("Purge: %v", err)
		}
		if n != 0 {
			e.Errorf("Purge deleted %d records, want 0: the only record is a lease renewed %v ago for %v (the renewal must move the deadline Purge goes by)", n, lease*6/10, lease)
		}
		e.wantInProgress("k", "fp", tok)
		if e.clock == nil {
			return
		}
		// A lapsed lease is kept store.LapsedKept after it ends: counted
		// from the renewed lease, not the first.
		e.clock.Advance(store.LapsedKept)
		if n, err := p.Purge(e.ctx); err != nil || n != 0 {
			e.Errorf("Purge a LapsedKept after the first lease ended, before the renewed one's LapsedKept = %d, %v; want 0, nil", n, err)
		}
	}},
	{"CancelledContext", func(e *env) {
		p := e.purger()
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		if _, err := p.Purge(ctx); !errors.Is(err, context.Canceled) {
			e.Errorf("Purge with a cancelled context: error %v, want one matching context.Canceled", err)
		}
	}},
}

func (e *env) purger() store.Purger {
	e.Helper()
	p, ok := e.s.(store.Purger)
	if !ok {
		e.Skip("store does not implement store.Purger")
	}
	return p
}

func (e *env) transactor() store.Transactor {
	e.Helper()
	tx, ok := e.s.(store.Transactor)
	if !ok {
		e.Skip("store does not implement store.Transactor")
	}
	return tx
}

var errBoom = errors.New("storetest: boom")

var transactorCases = []testCase{
	{"CommitKeepsCompleted", func(e *env) {
		tx := e.transactor()
		tok := store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			c, err := s.Claim(ctx, "k", "fp", tok, long)
			if err != nil || c.Outcome != store.Acquired {
				return fmt.Errorf("claim in the transaction = %v, %v; want acquired", c.Outcome, err)
			}
			return s.Complete(ctx, "k", tok, []byte("committed"), long)
		})
		if err != nil {
			e.Fatalf("InTx: %v", err)
		}
		e.wantCompleted("k", "fp", tok, []byte("committed"))
	}},
	{"ErrorRollsBack", func(e *env) {
		tx := e.transactor()
		tok := store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if _, err := s.Claim(ctx, "k", "fp", tok, long); err != nil {
				return err
			}
			if err := s.Complete(ctx, "k", tok, []byte("rolled back"), long); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			e.Fatalf("InTx returned %v, want the function's error", err)
		}
		e.wantAbsent("k", "after the transaction rolled back")
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"PanicRollsBack", func(e *env) {
		tx := e.transactor()
		tok := store.NewToken()
		got := func() (p any) {
			defer func() { p = recover() }()
			_ = tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
				if _, err := s.Claim(ctx, "k", "fp", tok, long); err != nil {
					return err
				}
				panic(errBoom)
			})
			return nil
		}()
		if got != errBoom {
			e.Fatalf("InTx with a panicking function: recovered %v, want the panic re-raised with its value", got)
		}
		e.wantAbsent("k", "after the transaction panicked")
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"ConcurrentSameKey", func(e *env) {
		// The seeds' test at the store level: ten transactions claim one key
		// at once; one does the work and commits, the others wait for it and
		// replay its response instead of failing or seeing InProgress.
		tx := e.transactor()
		const n = 10
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			acquired []store.Token
			outcomes = map[store.Outcome]int{}
			replays  [][]byte
		)
		start := make(chan struct{})
		errs := make(chan error, n)
		for _, tok := range tokens(n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
					c, err := s.Claim(ctx, "k", "fp", tok, long)
					if err != nil {
						return err
					}
					mu.Lock()
					outcomes[c.Outcome]++
					if c.Outcome == store.Completed {
						replays = append(replays, c.Record.Response)
					}
					if c.Outcome == store.Acquired {
						acquired = append(acquired, tok)
					}
					mu.Unlock()
					if c.Outcome != store.Acquired {
						return nil
					}
					time.Sleep(20 * time.Millisecond) // the work: give the others time to arrive
					return s.Complete(ctx, "k", tok, []byte("paid by "+string(tok)), long)
				})
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				e.Errorf("InTx: %v", err)
			}
		}
		if len(acquired) != 1 || outcomes[store.Completed] != n-1 {
			e.Fatalf("outcomes %v, want 1 acquired and %d completed (duplicates must wait for the commit, then replay)", outcomes, n-1)
		}
		want := []byte("paid by " + string(acquired[0]))
		for _, r := range replays {
			if string(r) != string(want) {
				e.Errorf("a duplicate replayed %q, want %q", r, want)
			}
		}
		e.wantCompleted("k", "fp", acquired[0], want)
	}},
}
