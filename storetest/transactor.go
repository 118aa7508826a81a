package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The Transactor promise: key, the caller's own writes and the stored
// response commit or roll back together, and nothing else joins them.

// effects returns the subject's effect hooks, skipping the case without them.
func (e *env) effects() (effect func(ctx context.Context, key string) error, count func(key string) int) {
	e.Helper()
	if e.sub.Effect == nil || e.sub.CountEffects == nil {
		e.Skip("needs Subject.Effect and Subject.CountEffects")
	}
	return e.sub.Effect, func(key string) int {
		e.Helper()
		n, err := e.sub.CountEffects(e.ctx, key)
		if err != nil {
			e.Fatalf("CountEffects(%q): %v", key, err)
		}
		return n
	}
}

var transactorPromiseCases = []testCase{
	{"EffectCommitsWithKey", func(e *env) {
		tx := e.transactor()
		effect, count := e.effects()
		tok := store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if c, err := s.Claim(ctx, "k", "fp", tok, long); err != nil || c.Outcome != store.Acquired {
				return errors.Join(err, errors.New("storetest: Claim in the transaction: "+c.Outcome.String()+", want acquired"))
			}
			if err := effect(ctx, "k"); err != nil {
				return err
			}
			return s.Complete(ctx, "k", tok, []byte("done"), long)
		})
		if err != nil {
			e.Fatalf("InTx: %v", err)
		}
		if n := count("k"); n != 1 {
			e.Fatalf("after the commit: %d effects, want 1", n)
		}
		e.wantCompleted("k", "fp", tok, []byte("done"))
		// A duplicate in a transaction of its own replays and writes nothing.
		err = tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			c, err := s.Claim(ctx, "k", "fp", store.NewToken(), long)
			if err != nil {
				return err
			}
			if c.Outcome != store.Completed {
				return errors.New("storetest: the duplicate's Claim: " + c.Outcome.String() + ", want completed")
			}
			return nil
		})
		if err != nil {
			e.Fatalf("duplicate InTx: %v", err)
		}
		if n := count("k"); n != 1 {
			e.Errorf("after the duplicate: %d effects, want still 1", n)
		}
	}},
	{"EffectRollsBackWithKey", func(e *env) {
		tx := e.transactor()
		effect, count := e.effects()
		for _, how := range []string{"error", "panic"} {
			key := "k-" + how
			tok := store.NewToken()
			fn := func(ctx context.Context, s store.Store) error {
				if _, err := s.Claim(ctx, key, "fp", tok, long); err != nil {
					return err
				}
				if err := effect(ctx, key); err != nil {
					return err
				}
				if err := s.Complete(ctx, key, tok, []byte("rolled back"), long); err != nil {
					return err
				}
				if how == "panic" {
					panic(errBoom)
				}
				return errBoom
			}
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil && p != errBoom {
						panic(p)
					}
				}()
				return tx.InTx(e.ctx, fn)
			}()
			if how == "error" && !errors.Is(err, errBoom) {
				e.Fatalf("InTx: %v, want the function's error", err)
			}
			if n := count(key); n != 0 {
				e.Errorf("after a rollback by %s: %d effects, want 0 (the effect must roll back with the key)", how, n)
			}
			e.wantAbsent(key, "after the transaction rolled back by "+how)
			// The retry runs the work again, once.
			retry := store.NewToken()
			err = tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
				if c, err := s.Claim(ctx, key, "fp", retry, long); err != nil || c.Outcome != store.Acquired {
					return errors.Join(err, errors.New("storetest: the retry's Claim: "+c.Outcome.String()+", want acquired"))
				}
				if err := effect(ctx, key); err != nil {
					return err
				}
				return s.Complete(ctx, key, retry, []byte("retried"), long)
			})
			if err != nil {
				e.Fatalf("retry InTx after a rollback by %s: %v", how, err)
			}
			if n := count(key); n != 1 {
				e.Errorf("after the retry: %d effects, want 1", n)
			}
			e.wantCompleted(key, "fp", retry, []byte("retried"))
		}
	}},
	{"AcquiredCommitsInProgress", func(e *env) {
		// fn returns nil after acquiring without completing or releasing:
		// the claim commits in progress and holds the key until its lease
		// lapses.
		tx := e.transactor()
		effect, count := e.effects()
		tok := store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if _, err := s.Claim(ctx, "k", "fp", tok, e.short()); err != nil {
				return err
			}
			return effect(ctx, "k")
		})
		if err != nil {
			e.Fatalf("InTx: %v", err)
		}
		if n := count("k"); n != 1 {
			e.Errorf("after the commit: %d effects, want 1", n)
		}
		e.wantInProgress("k", "fp", tok)
		c := e.claimWant("k", "fp", store.NewToken(), long, store.InProgress)
		e.checkInProgress("another token's Claim after the commit", c.Record, "fp", tok)
		e.lapse(e.short())
		e.claimWant("k", "fp", store.NewToken(), long, store.Acquired)
	}},
	{"LeaseLapsesInside", func(e *env) {
		// The lease still applies inside the transaction. Complete after it
		// ran out may succeed (then everything commits) or fail with
		// ErrLeaseLost (fn returns it, and everything rolls back); either
		// way key, effect and response stay together.
		tx := e.transactor()
		effect, count := e.effects()
		tok := store.NewToken()
		var completeErr error
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if _, err := s.Claim(ctx, "k", "fp", tok, e.short()); err != nil {
				return err
			}
			if err := effect(ctx, "k"); err != nil {
				return err
			}
			e.lapse(e.short())
			completeErr = s.Complete(ctx, "k", tok, []byte("late"), long)
			return completeErr
		})
		switch {
		case completeErr == nil && err == nil:
			e.wantCompleted("k", "fp", tok, []byte("late"))
			if n := count("k"); n != 1 {
				e.Errorf("Complete after the lease lapsed succeeded and InTx committed, with %d effects; want 1", n)
			}
		case errors.Is(completeErr, store.ErrLeaseLost) && errors.Is(err, store.ErrLeaseLost):
			e.wantAbsent("k", "after a Complete refused for a lapsed lease rolled the transaction back")
			if n := count("k"); n != 0 {
				e.Errorf("the transaction rolled back after ErrLeaseLost, but %d effects stayed; want 0", n)
			}
		default:
			e.Fatalf("Complete after the lease lapsed inside InTx: %v, InTx: %v; want nil and nil, or store.ErrLeaseLost and store.ErrLeaseLost", completeErr, err)
		}
	}},
	{"GetInsideTransaction", func(e *env) {
		// The Store handed to fn reads inside the transaction: its Get
		// sees fn's own Claim and Complete before they commit.
		tx := e.transactor()
		tok := store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if c, err := s.Claim(ctx, "k", "fp", tok, long); err != nil || c.Outcome != store.Acquired {
				return errors.Join(err, errors.New("storetest: Claim in the transaction: "+c.Outcome.String()+", want acquired"))
			}
			if r, err := s.Get(ctx, "k"); err != nil || r.Status != store.StatusInProgress || r.Token != tok {
				return fmt.Errorf("storetest: Get through fn's Store after its Claim: %s, %v; want the transaction's own claim, in progress (a Get outside the transaction sees nothing)", describe(r), err)
			}
			if err := s.Complete(ctx, "k", tok, []byte("inside"), long); err != nil {
				return err
			}
			if r, err := s.Get(ctx, "k"); err != nil || r.Status != store.StatusCompleted || string(r.Response) != "inside" {
				return fmt.Errorf("storetest: Get through fn's Store after its Complete: %s, %v; want the transaction's own completed record", describe(r), err)
			}
			return nil
		})
		if err != nil {
			e.Fatalf("InTx: %v", err)
		}
		e.wantCompleted("k", "fp", tok, []byte("inside"))
	}},
	{"RunsFnOnce", func(e *env) {
		// InTx calls fn once, whether it returns nil, an error or panics:
		// fn does the caller's effect, and running it again is a second
		// effect the caller did not ask for.
		tx := e.transactor()
		for _, how := range []string{"returns nil", "returns an error", "panics"} {
			key := "k-" + strings.ReplaceAll(how, " ", "-")
			runs := 0
			fn := func(ctx context.Context, s store.Store) error {
				runs++
				tok := store.NewToken()
				if _, err := s.Claim(ctx, key, "fp", tok, long); err != nil {
					return err
				}
				switch how {
				case "returns an error":
					return errBoom
				case "panics":
					panic(errBoom)
				}
				return s.Complete(ctx, key, tok, []byte("once"), long)
			}
			err := func() error {
				defer func() {
					if p := recover(); p != nil && p != errBoom {
						panic(p)
					}
				}()
				return tx.InTx(e.ctx, fn)
			}()
			if how == "returns nil" && err != nil {
				e.Fatalf("InTx: %v", err)
			}
			if runs != 1 {
				e.Errorf("InTx ran fn %d times when fn %s, want once", runs, how)
			}
		}
	}},
	{"JoinsOnlyOwnTransactions", func(e *env) {
		// Another store (its own table or database) called with InTx's
		// context must not write into this store's transaction: when the
		// transaction rolls back, the other store's record stays.
		tx := e.transactor()
		other := e.other()
		tok, otherTok := store.NewToken(), store.NewToken()
		err := tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
			if _, err := s.Claim(ctx, "k", "fp", tok, long); err != nil {
				return err
			}
			c, err := other.Claim(ctx, "k", "fp", otherTok, long)
			if err != nil {
				return err
			}
			if c.Outcome != store.Acquired {
				return errors.New("storetest: the other store's Claim: " + c.Outcome.String() + ", want acquired (it is another store)")
			}
			if err := other.Complete(ctx, "k", otherTok, []byte("other"), long); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			e.Fatalf("InTx: %v, want the function's error", err)
		}
		e.wantAbsent("k", "in the store whose transaction rolled back")
		r, err := other.Get(e.ctx, "k")
		if err != nil {
			e.Fatalf("the other store's Get after this store's transaction rolled back: %v; want its own completed record (it joined a transaction that was not its own)", err)
		}
		e.checkCompleted("the other store's record", r, "fp", otherTok, []byte("other"))
	}},
	{"BlockedClaimHonoursContext", func(e *env) {
		// A Claim that waits behind a transaction holding the key returns
		// promptly when its context ends: on the store, and inside another
		// InTx.
		tx := e.transactor()
		holder := store.NewToken()
		held, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- tx.InTx(e.ctx, func(ctx context.Context, s store.Store) error {
				if c, err := s.Claim(ctx, "k", "fp", holder, long); err != nil || c.Outcome != store.Acquired {
					close(held)
					return errors.Join(err, errors.New("storetest: the holder's Claim: "+c.Outcome.String()+", want acquired"))
				}
				close(held)
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				return s.Complete(ctx, "k", holder, []byte("held"), long)
			})
		}()
		<-held
		released := false
		free := func() {
			if !released {
				released = true
				close(release)
			}
		}
		defer free()
		const wait = 200 * time.Millisecond
		const promptly = 3 * time.Second
		blocked := []struct {
			name  string
			claim func(ctx context.Context) (store.Claim, error)
		}{
			{"Claim on the store", func(ctx context.Context) (store.Claim, error) {
				return e.s.Claim(ctx, "k", "fp", store.NewToken(), long)
			}},
			{"Claim in another InTx", func(ctx context.Context) (c store.Claim, err error) {
				err = tx.InTx(ctx, func(ctx context.Context, s store.Store) error {
					c, err = s.Claim(ctx, "k", "fp", store.NewToken(), long)
					return err
				})
				return c, err
			}},
		}
		for _, b := range blocked {
			type result struct {
				c       store.Claim
				err     error
				elapsed time.Duration
			}
			res := make(chan result, 1)
			ctx, cancel := context.WithTimeout(e.ctx, wait)
			began := time.Now()
			go func() {
				c, err := b.claim(ctx)
				res <- result{c, err, time.Since(began)}
			}()
			var r result
			select {
			case r = <-res:
			case <-time.After(wait + promptly):
				e.Errorf("%s blocked behind a transaction holding the key: still waiting %v after its context ended", b.name, promptly)
				free()
				r = <-res
			}
			cancel()
			switch {
			case r.err != nil && !errors.Is(r.err, context.DeadlineExceeded):
				e.Errorf("%s after its context ended: error %v, want one matching context.DeadlineExceeded", b.name, r.err)
			case r.err == nil && r.c.Outcome == store.Acquired:
				e.Errorf("%s acquired a key that a live transaction holds", b.name)
			}
		}
		free()
		if err := <-done; err != nil {
			e.Fatalf("the holder's InTx: %v", err)
		}
		e.wantCompleted("k", "fp", holder, []byte("held"))
	}},
}

// other returns a second store from the harness, independent of e's.
func (e *env) other() store.Store {
	e.Helper()
	sub := e.h.New(e.T)
	if sub.Store == nil {
		e.Fatal("storetest: Harness.New returned a Subject without a Store")
	}
	return sub.Store
}
