// Package frameworktest holds what the tests of the framework integrations
// (contrib/ginidem, contrib/echoidem, contrib/chiidem) share: the payments
// effect they count, the two modes they run in (lease mode on memory,
// transactional mode on SQLite) and a client for their servers.
package frameworktest

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

// Payments is the effect: rows in SQLite written in the middleware's
// transaction (transactional mode), or a counter (lease mode).
type Payments struct {
	mu sync.Mutex
	n  int
	// DB is set in transactional mode: each payment is a row of its
	// payments table, written in the middleware's transaction.
	DB *sql.DB
	// In and Hold, when set, make Create announce itself on In and then
	// wait until Hold is closed, to hold a request in flight.
	In   chan struct{}
	Hold chan struct{}
}

// Create makes one payment and returns its id.
func (p *Payments) Create(ctx context.Context, account string, amount int) (int64, error) {
	if p.In != nil {
		p.In <- struct{}{}
		<-p.Hold
	}
	if p.DB != nil {
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return 0, errors.New("not in the idempotency transaction")
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO payments (account, amount) VALUES (?, ?)`, account, amount)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return int64(p.n), nil
}

// Count returns how many payments were made (committed, in transactional
// mode).
func (p *Payments) Count(t *testing.T) int {
	t.Helper()
	if p.DB != nil {
		var n int
		require.NoError(t, p.DB.QueryRow(`SELECT count(*) FROM payments`).Scan(&n))
		return n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Mode is a store and the middleware options that go with it.
type Mode struct {
	Name string
	Open func(t *testing.T) (store.Store, *Payments)
	Opts []httpidem.Option
}

// Modes are lease mode on the memory store and transactional mode on
// SQLite.
var Modes = []Mode{
	{"lease/memory", func(t *testing.T) (store.Store, *Payments) {
		st, err := memory.New()
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st, &Payments{}
	}, nil},
	{"transactional/sqlite", func(t *testing.T) (store.Store, *Payments) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		_, err = st.DB().Exec(`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL DEFAULT '', amount INTEGER NOT NULL)`)
		require.NoError(t, err)
		return st, &Payments{DB: st.DB()}
	}, []httpidem.Option{httpidem.WithTransactions()}},
}

// Middleware builds the engine for st (engine defaults: a duplicate in
// flight waits and replays) and the middleware with the mode's options;
// opts are idem.Options (the engine's) or httpidem.Options.
func Middleware(t *testing.T, m Mode, st store.Store, opts ...any) func(http.Handler) http.Handler {
	t.Helper()
	var eopts []idem.Option
	hopts := append([]httpidem.Option(nil), m.Opts...)
	for _, o := range opts {
		switch o := o.(type) {
		case idem.Option:
			eopts = append(eopts, o)
		case httpidem.Option:
			hopts = append(hopts, o)
		default:
			t.Fatalf("frameworktest: option of type %T", o)
		}
	}
	e, err := idem.New(st, eopts...)
	require.NoError(t, err)
	mw, err := httpidem.New(e, hopts...)
	require.NoError(t, err)
	return mw
}

// Result is what a client got for one request.
type Result struct {
	Status   int
	Body     string
	Replayed bool // Idempotent-Replayed: true
	Header   http.Header
}

// Post sends a JSON body to url with key as its Idempotency-Key (none when
// empty) and the extra headers given as name, value pairs.
func Post(t *testing.T, url, key, body string, headers ...string) Result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", `"`+key+`"`)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return Result{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true", resp.Header}
}
