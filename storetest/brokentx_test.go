package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/idemkit/idemkit/store"
)

// The map store's transactions: InTx holds the store's write lock (sem) for
// the whole of fn, as SQLite does, and undoes fn's writes on an error or a
// panic by restoring snapshots of every store that joined the transaction.
// A store joins only its own transactions; outside one, a write waits
// (no longer than its context) until no transaction holds the lock, and
// then runs under the store's mutex alone, so writes outside transactions
// still race each other as the broken variants need.

type txCtxKey struct{}

type mapTx struct {
	owner  *mapStore
	before map[string]store.Record // the owner's records when it began (for tx-get-outside)
	undo   []func()
	joined map[*mapStore]bool
}

var _ store.Transactor = (*mapStore)(nil)

func txOf(ctx context.Context) *mapTx {
	tx, _ := ctx.Value(txCtxKey{}).(*mapTx)
	return tx
}

// enter makes a write ready to run: in the transaction ctx carries when it
// is this store's, otherwise once no transaction holds the write lock.
func (s *mapStore) enter(ctx context.Context) error {
	if tx := txOf(ctx); tx != nil && (tx.owner == s || s.broken("tx-join-any")) {
		tx.join(s)
		return nil
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	<-s.sem
	return nil
}

func (s *mapStore) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	default:
	}
	if s.broken("tx-blocks-ignoring-context") {
		s.sem <- struct{}{}
		return nil
	}
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("map: waiting for the write lock: %w", ctx.Err())
	}
}

// join snapshots s, once, so the transaction can undo what s writes in it.
func (tx *mapTx) join(s *mapStore) {
	if tx.joined[s] {
		return
	}
	tx.joined[s] = true
	s.mu.Lock()
	m, fx := maps.Clone(s.m), maps.Clone(s.effects)
	s.mu.Unlock()
	tx.undo = append(tx.undo, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.m = m
		if !s.broken("effect-outside-tx") {
			s.effects = fx
		}
	})
}

func (s *mapStore) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("map: begin: %w", err)
	}
	if tx := txOf(ctx); tx != nil && tx.owner == s {
		return fn(ctx, s) // nested: the same transaction (no savepoints here)
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("map: begin: %w", err)
	}
	defer func() { <-s.sem }()
	tx := s.begin()
	committed := false
	defer func() {
		if !committed {
			tx.rollback()
		}
	}()
	if err := fn(context.WithValue(ctx, txCtxKey{}, tx), s); err != nil {
		if s.broken("tx-reruns-fn") {
			// Takes every error for a conflict: rolls back and runs fn
			// again, then reports the first error.
			tx.rollback()
			tx = s.begin()
			_ = fn(context.WithValue(ctx, txCtxKey{}, tx), s)
		}
		return err
	}
	if s.broken("tx-drops-uncompleted") {
		s.mu.Lock()
		for k, r := range s.m {
			if r.Status == store.StatusInProgress {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
	committed = true
	return nil
}

// begin starts a transaction of s; the caller holds the write lock.
func (s *mapStore) begin() *mapTx {
	s.mu.Lock()
	before := maps.Clone(s.m)
	s.mu.Unlock()
	tx := &mapTx{owner: s, before: before, joined: map[*mapStore]bool{}}
	tx.join(s)
	return tx
}

// rollback undoes what every store wrote in tx.
func (tx *mapTx) rollback() {
	for i := len(tx.undo) - 1; i >= 0; i-- {
		tx.undo[i]()
	}
	tx.undo = nil
}

// effect is the harness's Effect: one row for key in the transaction ctx
// carries.
func (s *mapStore) effect(ctx context.Context, key string) error {
	tx := txOf(ctx)
	if tx == nil {
		return errors.New("map: effect: the context carries no transaction")
	}
	tx.owner.mu.Lock()
	defer tx.owner.mu.Unlock()
	tx.owner.effects[key]++
	return nil
}

func (s *mapStore) countEffects(ctx context.Context, key string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[key], nil
}
