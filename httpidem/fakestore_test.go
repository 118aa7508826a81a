package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// fakeStore is a minimal in-process store for the middleware's tests: one
// mutex held across check and write, an injectable clock, and knobs to make
// calls fail. It follows the contract in package store.
type fakeStore struct {
	mu   sync.Mutex
	recs map[string]store.Record
	now  func() time.Time

	claimErr    error // returned by every Claim and Renew when set
	completeErr error // returned by every Complete when set
	renewLose   bool  // another token takes the key at the next Renew; a re-entrant Claim reports InProgress
	claims      int
	renews      int
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
	prev, found := s.recs[key]
	r, ok := s.live(key)
	switch {
	case !ok:
		attempt, fence := store.Successor(prev, found, tok, now)
		r = store.Record{Key: key, Fingerprint: fp, Status: store.StatusInProgress, Token: tok, LockedUntil: now.Add(lease), ExpiresAt: now.Add(lease),
			Attempt: attempt, Fence: fence}
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

func (s *fakeStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, tok, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renews++
	if s.claimErr != nil {
		return fmt.Errorf("fake: renew: %w", s.claimErr)
	}
	r, ok := s.live(key)
	if !ok || r.Status != store.StatusInProgress || r.Token != tok {
		return fmt.Errorf("fake: renew: %w", store.ErrLeaseLost)
	}
	if s.renewLose {
		r.Token = "taker" // another claim took the key over
		s.recs[key] = r
		return fmt.Errorf("fake: renew: %w", store.ErrLeaseLost)
	}
	now := s.now()
	r.LockedUntil, r.ExpiresAt = now.Add(lease), now.Add(lease)
	s.recs[key] = r
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

// mustNew is httpidem.New for tests, on an engine built for s: opts are
// idem.Options (for the engine), httpidem.Options, or a func(ev) hook (the
// tests' view of the engine's tracer, see hookTracer). The fake Transactor
// runs in transactional mode (chosen here, explicitly, as a user would),
// every other store in lease mode. Unless a test says otherwise, a key in
// progress is reported at once (idem.WithWait(0)).
func mustNew(t testing.TB, s store.Store, opts ...any) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := newMW(s, opts...)
	if err != nil {
		t.Fatalf("httpidem.New: %v", err)
	}
	return mw
}

func newMW(s store.Store, opts ...any) (func(http.Handler) http.Handler, error) {
	eopts := []idem.Option{idem.WithWait(0)}
	var hopts []httpidem.Option
	if _, ok := s.(*fakeTxStore); ok {
		hopts = append(hopts, httpidem.WithTransactions())
	}
	for _, o := range opts {
		switch o := o.(type) {
		case idem.Option:
			eopts = append(eopts, o)
		case httpidem.Option:
			hopts = append(hopts, o)
		case func(event):
			eopts = append(eopts, idem.WithTracer(hookTracer(o)))
		default:
			panic(fmt.Sprintf("mustNew: option of type %T", o))
		}
	}
	e, err := idem.New(s, eopts...)
	if err != nil {
		return nil, err
	}
	return httpidem.New(e, hopts...)
}

// eventKind is what the tests see of a request: the engine's events and
// the run's end, named as the middleware's answers.
type eventKind uint8

const (
	evReplayed eventKind = iota + 1
	evConflict
	evMismatch
	evStored
	evReleased
	evStoreError
	evRenewed
	evWaiting
	evLeaseLost
	evStoredWithoutResponse
)

type event struct {
	Kind    eventKind
	Request *http.Request
	Key     string
	Status  int
	Reason  string
	Err     error
}

// hookTracer turns a run's events into the tests' events.
type hookTracer func(event)

func (h hookTracer) TraceRunStart(ctx context.Context, _ idem.RunStart) context.Context { return ctx }

func (h hookTracer) TraceRunEnd(ctx context.Context, end idem.RunEnd) {
	r, _ := httpidem.RequestFrom(ctx)
	ev := event{Request: r, Key: end.Key}
	switch end.Result.Outcome {
	case store.Completed:
		ev.Kind = evReplayed
		if end.Result.NotKept {
			ev.Status, ev.Reason = http.StatusGone, "response not kept"
		}
	case store.InProgress:
		if end.Err != nil {
			return
		}
		ev.Kind, ev.Status = evConflict, http.StatusConflict
	case store.Mismatch:
		ev.Kind, ev.Status = evMismatch, http.StatusUnprocessableEntity
	default:
		return
	}
	h(ev)
}

func (h hookTracer) TraceEvent(ctx context.Context, e idem.Event) {
	r, _ := httpidem.RequestFrom(ctx)
	ev := event{Request: r, Key: e.Key, Status: e.Status, Reason: e.Reason, Err: e.Err}
	switch e.Kind {
	case idem.Completed:
		ev.Kind = evStored
		if e.NotKept {
			ev.Kind = evStoredWithoutResponse
		}
	case idem.Released:
		ev.Kind = evReleased
	case idem.StoreError, idem.Unknown:
		ev.Kind = evStoreError
	case idem.SlowClaim:
		ev.Kind, ev.Err = evStoreError, idem.ErrSlowClaim
	case idem.Renewed:
		ev.Kind = evRenewed
	case idem.Waiting:
		ev.Kind = evWaiting
	case idem.LeaseLost:
		ev.Kind = evLeaseLost
	default:
		return
	}
	h(ev)
}
