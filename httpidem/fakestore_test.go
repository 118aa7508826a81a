package httpidem_test

import (
	"context"
	"net/http"
	"testing"

	"errors"
	"fmt"
	"github.com/idemkit/idemkit/httpidem"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// fakeStore is a minimal in-process store for the middleware's tests: one
// mutex held across check and write, an injectable clock, and knobs to make
// calls fail. It follows the contract in package store.
type fakeStore struct {
	mu   sync.Mutex
	recs map[string]store.Record
	now  func() time.Time

	claimErr    error // returned by every Claim when set
	completeErr error // returned by every Complete when set
	renewLose   bool  // a re-entrant Claim reports InProgress (lease lost)
	claims      int
	onClaim     func(key string, tok store.Token) // called after every Claim, outside the lock
}

func newFakeStore() *fakeStore {
	return &fakeStore{recs: map[string]store.Record{}, now: time.Now}
}

func (s *fakeStore) live(key string) (store.Record, bool) {
	r, ok := s.recs[key]
	if !ok || !s.now().Before(r.ExpiresAt) {
		delete(s.recs, key)
		return store.Record{}, false
	}
	return r, true
}

func (s *fakeStore) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fp, tok, lease); err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	c, err := s.claim(key, fp, tok, lease)
	if s.onClaim != nil && err == nil {
		s.onClaim(key, tok)
	}
	return c, err
}

func (s *fakeStore) claim(key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims++
	if s.claimErr != nil {
		return store.Claim{}, fmt.Errorf("fake: claim: %w", s.claimErr)
	}
	now := s.now()
	r, ok := s.live(key)
	switch {
	case !ok:
		r = store.Record{Key: key, Fingerprint: fp, Status: store.StatusInProgress, Token: tok, LockedUntil: now.Add(lease), ExpiresAt: now.Add(lease)}
		s.recs[key] = r
		return store.Claim{Outcome: store.Acquired, Record: r}, nil
	case r.Fingerprint != fp:
		return store.Claim{Outcome: store.Mismatch, Record: r}, nil
	case r.Status == store.StatusCompleted:
		r.Response = slices.Clone(r.Response)
		return store.Claim{Outcome: store.Completed, Record: r}, nil
	case r.Token == tok && !s.renewLose:
		r.LockedUntil, r.ExpiresAt = now.Add(lease), now.Add(lease)
		s.recs[key] = r
		return store.Claim{Outcome: store.Acquired, Record: r}, nil
	}
	return store.Claim{Outcome: store.InProgress, Record: r}, nil
}

func (s *fakeStore) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, tok, retention); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.completeErr != nil {
		return fmt.Errorf("fake: complete: %w", s.completeErr)
	}
	r, ok := s.live(key)
	if !ok || r.Token != tok {
		return store.ErrLeaseLost
	}
	now := s.now()
	r.Status, r.Response, r.LockedUntil, r.ExpiresAt = store.StatusCompleted, slices.Clone(resp), time.Time{}, now.Add(retention)
	s.recs[key] = r
	return nil
}

func (s *fakeStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := store.CheckRelease(key, tok); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.live(key); ok && r.Token == tok && r.Status == store.StatusInProgress {
		delete(s.recs, key)
	}
	return nil
}

func (s *fakeStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok {
		return store.Record{}, store.ErrNotFound
	}
	r.Response = slices.Clone(r.Response)
	return r, nil
}

func (s *fakeStore) set(f func(s *fakeStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// fakeTxStore adds store.Transactor: transactions are serialised by one
// mutex (as SQLite serialises writers), so a concurrent duplicate waits for
// the first to commit; a rollback restores the records and the ledger of
// effects as they were. The handler reaches the transaction's ledger with
// ledgerFrom(ctx).
type fakeTxStore struct {
	*fakeStore
	txMu      sync.Mutex
	ledgerMu  sync.Mutex
	ledger    []string // committed effects
	commitErr error
}

type ledgerKey struct{}

// txLedger is the view of the ledger inside one transaction.
type txLedger struct{ pending []string }

func (l *txLedger) Add(e string) { l.pending = append(l.pending, e) }

func ledgerFrom(ctx context.Context) (*txLedger, bool) {
	l, ok := ctx.Value(ledgerKey{}).(*txLedger)
	return l, ok
}

func newFakeTxStore() *fakeTxStore { return &fakeTxStore{fakeStore: newFakeStore()} }

func (s *fakeTxStore) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) (err error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.mu.Lock()
	snapshot := maps.Clone(s.recs)
	s.mu.Unlock()
	l := &txLedger{}
	rollback := func() {
		s.mu.Lock()
		s.recs = snapshot
		s.mu.Unlock()
	}
	defer func() {
		if p := recover(); p != nil {
			rollback()
			panic(p)
		}
	}()
	if err := fn(context.WithValue(ctx, ledgerKey{}, l), s.fakeStore); err != nil {
		rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		rollback()
		return err
	}
	s.mu.Lock()
	cerr := s.commitErr
	s.mu.Unlock()
	if cerr != nil {
		rollback()
		return fmt.Errorf("fake: commit: %w", cerr)
	}
	s.ledgerMu.Lock()
	s.ledger = append(s.ledger, l.pending...)
	s.ledgerMu.Unlock()
	return nil
}

func (s *fakeTxStore) committed() []string {
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	return slices.Clone(s.ledger)
}

var errDown = errors.New("connection refused")

var (
	_ store.Store      = (*fakeStore)(nil)
	_ store.Transactor = (*fakeTxStore)(nil)
)

// mustNew is httpidem.New for tests: the fake Transactor runs in
// transactional mode (chosen here, explicitly, as a user would), every other
// store in lease mode.
func mustNew(t testing.TB, s store.Store, opts ...httpidem.Option) func(http.Handler) http.Handler {
	t.Helper()
	if _, ok := s.(*fakeTxStore); ok {
		opts = append([]httpidem.Option{httpidem.WithTransactions()}, opts...)
	}
	mw, err := httpidem.New(s, opts...)
	if err != nil {
		t.Fatalf("httpidem.New: %v", err)
	}
	return mw
}
