// Package httpconformance holds what the httpidemtest runs of httpidem and
// the framework integrations share: the middleware they run (built in one
// place, Middleware), the payments effect with an httpidemtest.Control, a
// server that a restart rebuilds on the same data, and the stores.
package httpconformance

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

// MaxBody is the fingerprint limit the runs' middleware uses: small, so
// that the large-body rules stay cheap.
const MaxBody = 64 << 10

// ScopeHeader is the header the runs' middleware scopes keys by.
const ScopeHeader = "X-Tenant"

// Middleware is the one place the httpidemtest runs build the middleware:
// keys scoped by ScopeHeader, a canonical-JSON fingerprint limited to
// MaxBody, transactional mode with tx, and duplicates in flight waiting up
// to wait (0: a 409 at once).
//
// The lease is 2 s because today's httpidem sends the lease's remainder as
// a 409's Retry-After, and httpidemtest wants at most 2 s; once the engine
// sends its short hint the lease can go back to the default.
func Middleware(st store.Store, wait time.Duration, tx bool) (func(http.Handler) http.Handler, error) {
	opts := []httpidem.Option{
		httpidem.WithScope(func(r *http.Request) ([]string, error) { return []string{r.Header.Get(ScopeHeader)}, nil }),
		httpidem.WithFingerprinter(keyer.NewFingerprinter(keyer.WithCanonicalJSON(), keyer.WithMaxBody(MaxBody))),
		httpidem.WithLease(2 * time.Second),
		httpidem.WithWait(wait),
	}
	if tx {
		opts = append(opts, httpidem.WithTransactions())
	}
	return httpidem.New(st, opts...)
}

// Payments is the effect: a count of payments made, outside the store (a
// provider's), so it survives a restart.
type Payments struct {
	Control httpidemtest.Control
	n       atomic.Int64
}

// Create makes one payment after Control.Enter: it returns the payment's id,
// or the status to answer without one.
func (p *Payments) Create(ctx context.Context) (id int64, status int) {
	if status := p.Control.Enter(ctx); status != 0 {
		return 0, status
	}
	return p.n.Add(1), 0
}

// Count returns the payments made.
func (p *Payments) Count(context.Context) (int, error) { return int(p.n.Load()), nil }

// Answer writes a created payment's answer: 201, Location, a JSON body.
func Answer(w http.ResponseWriter, id int64, amount int) {
	b, _ := json.Marshal(map[string]int64{"id": id, "amount": int64(amount)})
	w.Header().Set("Location", "/payments/"+strconv.FormatInt(id, 10))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

// Handler is the payments endpoint as a plain net/http handler.
func (p *Payments) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount int `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		id, status := p.Create(r.Context())
		if status != 0 {
			http.Error(w, "failing on purpose", status)
			return
		}
		Answer(w, id, req.Amount)
	})
}

// Opener opens a store on a run's data and returns it with its close.
type Opener func() (store.Store, func(), error)

// Store is one kind of store a run uses.
type Store struct {
	Name    string
	Tx      bool // the middleware runs in transactional mode on it
	Durable bool // its data outlives a restart
	// Data makes the run's data and returns how to open a store on it.
	Data func(t *testing.T) Opener
}

// Memory is lease mode on the memory store; its data does not outlive a
// process, so a restart is not run on it.
var Memory = Store{Name: "memory", Data: func(t *testing.T) Opener {
	st, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return func() (store.Store, func(), error) { return st, func() {}, nil }
}}

// SQLite is transactional mode on a SQLite file, reopened on a restart.
var SQLite = Store{Name: "sqlite", Tx: true, Durable: true, Data: func(t *testing.T) Opener {
	path := filepath.Join(t.TempDir(), "idem.db")
	return func() (store.Store, func(), error) {
		st, err := sqlite.Open(path)
		if err != nil {
			return nil, nil, err
		}
		if err := st.Migrate(context.Background()); err != nil {
			st.Close()
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
}}

// Server serves what build returns, and builds it again on Restart, as a
// restarted process would, closing the old one's resources.
type Server struct {
	build   func() (http.Handler, func(), error)
	current atomic.Pointer[http.Handler]
	mu      sync.Mutex
	closeFn func()
}

// NewServer builds the first handler; t's cleanup closes the last.
func NewServer(t *testing.T, build func() (http.Handler, func(), error)) *Server {
	t.Helper()
	s := &Server{build: build}
	if err := s.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closeFn()
	})
	return s
}

// Restart builds the handler again and serves it from now on.
func (s *Server) Restart(context.Context) error {
	h, closeFn, err := s.build()
	if err != nil {
		return err
	}
	if h == nil {
		closeFn()
		return errors.New("httpconformance: build returned no handler")
	}
	s.mu.Lock()
	old := s.closeFn
	s.closeFn = closeFn
	s.mu.Unlock()
	s.current.Store(&h)
	if old != nil {
		old()
	}
	return nil
}

// ServeHTTP serves the current handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.current.Load()).ServeHTTP(w, r)
}

// Target is the httpidemtest target for the payments endpoint at path on
// srv, with restarts when the store's data outlives them.
func Target(srv *Server, p *Payments, path string, durable bool) httpidemtest.Target {
	tg := httpidemtest.Target{
		Handler:   srv,
		Path:      path,
		Body:      func() []byte { return []byte(`{"amount":1990}`) },
		OtherBody: func() []byte { return []byte(`{"amount":5}`) },
		Count:     p.Count,
		Hold:      p.Control.Hold,
		Fail:      p.Control.Fail,
		MaxBody:   MaxBody,
		Scopes:    []http.Header{{ScopeHeader: {"alice"}}, {ScopeHeader: {"bob"}}},
	}
	if durable {
		tg.Restart = srv.Restart
	}
	return tg
}

// Build returns a build function for NewServer: it opens a store of kind s
// on open's data, makes Middleware on it (waiting up to wait) and the
// handler with route.
func Build(s Store, open Opener, wait time.Duration, route func(func(http.Handler) http.Handler) http.Handler) func() (http.Handler, func(), error) {
	return func() (http.Handler, func(), error) {
		st, closeSt, err := open()
		if err != nil {
			return nil, nil, err
		}
		m, err := Middleware(st, wait, s.Tx)
		if err != nil {
			closeSt()
			return nil, nil, err
		}
		return route(m), closeSt, nil
	}
}

// Run runs httpidemtest on the payments endpoint at /payments, once per
// store, each in a subtest named for it: route puts the middleware and the
// endpoint (p's effect) in the framework under test. Duplicates in flight
// wait up to wait; the restart rule runs on the stores whose data outlives
// it.
func Run(t *testing.T, stores []Store, wait time.Duration, route func(p *Payments, mw func(http.Handler) http.Handler) http.Handler) {
	t.Helper()
	for _, s := range stores {
		t.Run(s.Name, func(t *testing.T) {
			p := &Payments{}
			srv := NewServer(t, Build(s, s.Data(t), wait, func(mw func(http.Handler) http.Handler) http.Handler { return route(p, mw) }))
			httpidemtest.Run(t, Target(srv, p, "/payments", s.Durable))
		})
	}
}
