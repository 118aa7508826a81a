package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/sqlite"
)

// payment is what POST /payments creates and returns.
type payment struct {
	ID     int64 `json:"id"`
	Amount int64 `json:"amount"`
}

// ledger keeps payments. create runs inside the request: for the SQL
// ledgers, inside the middleware's transaction, found in ctx (in lease mode,
// -mode lease, straight to the database: the payment commits at once, before
// the key is completed).
type ledger interface {
	create(ctx context.Context, user string, amount int64) (payment, error)
	list(ctx context.Context) ([]payment, error)
}

type app struct {
	store    store.Store
	ledger   ledger
	idem     func(http.Handler) http.Handler
	logger   *slog.Logger
	describe string
	close    func()

	// beforeCreate, when set, runs before a payment is created; an error
	// answers 500. The tests use it to hold a request in flight or fail one.
	beforeCreate func(ctx context.Context) error
	// logTakeover, when set, is called with the attempt of a payment that
	// takes its key over from a holder whose lease lapsed (the tests count
	// them); the demo logs those in any case.
	logTakeover func(idem.Attempt)
	// delay is the handler's latency after the payment is created and before
	// it answers (-delay): chaos runs use it to hit the window between the
	// effect and the stored response.
	delay time.Duration
	// purgeEvery and purgeObserver configure the cleanup job (startPurge).
	purgeEvery    time.Duration
	purgeObserver purge.Observer
}

// newApp builds the app. In the default mode (-mode tx) the SQL ledgers
// write through the middleware's transaction (transactional mode, chosen
// here explicitly) and the memory and Redis ones use leases; -mode lease
// uses leases on every store.
func newApp(st store.Store, led ledger, cfg config, logger *slog.Logger, describe string, closeFn func()) (*app, error) {
	a := &app{store: st, ledger: led, logger: logger, describe: describe, close: closeFn, delay: cfg.Delay,
		purgeEvery: cfg.PurgeEvery, purgeObserver: cfg.purge}
	// The engine holds what every surface shares: the wait, the retention,
	// the logger, the key redactor (and, in tests, a tracer).
	eopts := []idem.Option{
		// Duplicates in flight wait for the first and replay its answer,
		// on every store.
		idem.WithWait(cfg.Wait),
		// Keys and responses are kept this long; the cleanup job
		// (startPurge) deletes them after.
		idem.WithRetention(cfg.Retention),
		// Log lines name keys hashed (the default, said out loud): a key
		// holds the user's token (the scope) and the client's own key.
		idem.WithKeyRedactor(keyer.DefaultRedactor()),
		idem.WithLogger(logger),
	}
	if cfg.tracer != nil {
		eopts = append(eopts, idem.WithTracer(cfg.tracer))
	}
	if cfg.Lease > 0 {
		// In lease mode a key is held this long without renewal; the
		// engine renews it every half lease while the handler runs, so a
		// crashed demo's key lapses within one lease.
		eopts = append(eopts, idem.WithLease(cfg.Lease))
	}
	fp, err := keyer.NewFingerprinter(keyer.WithCanonicalJSON(), keyer.WithMaxBody(maxBody))
	if err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, err
	}
	e, err := idem.New(st, append(eopts, cfg.extra...)...)
	if err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, err
	}
	hopts := []httpidem.Option{
		// One client can never replay another's payment.
		httpidem.WithScope(func(r *http.Request) ([]string, error) {
			u, err := userOf(r)
			return []string{u}, err
		}),
		// {"amount":1990} and { "amount": 1990 } are the same request.
		httpidem.WithFingerprinter(fp),
	}
	if cfg.Mode != modeLease {
		// On the SQL stores the payment row, the key and the stored
		// response commit together; memory and Redis use leases. The
		// ledgers write through the backend's Querier either way.
		hopts = append(hopts, httpidem.WithTransactionsIfSupported())
	}
	mw, err := httpidem.New(e, hopts...)
	if err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, err
	}
	a.idem = mw
	return a, nil
}

// startPurge starts the cleanup job when the store can purge (SQLite, MySQL,
// PostgreSQL, memory; Redis expires keys itself) and purging is on: expired
// keys leave the store every purgeEvery (with jitter), the first run at
// once. stop ends the job and waits for it; call it before closing the
// store.
func (a *app) startPurge(ctx context.Context) (stop func()) {
	p, ok := a.store.(store.Purger)
	if !ok || a.purgeEvery <= 0 {
		return func() {}
	}
	opts := []purge.Option{purge.WithInterval(a.purgeEvery), purge.WithLogger(a.logger)}
	if a.purgeObserver != nil {
		opts = append(opts, purge.WithObserver(a.purgeObserver))
	}
	job, err := purge.New(p, opts...)
	if err != nil {
		// The interval is positive and the logger set: unreachable, but
		// said rather than hidden.
		a.logger.Error("cleanup job not started", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		job.Run(ctx) // returns nil once ctx is done
	}()
	return func() {
		cancel()
		<-done
	}
}

func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /payments", a.idem(http.HandlerFunc(a.createPayment)))
	mux.HandleFunc("GET /payments", a.listPayments)
	mux.HandleFunc("GET /payments/{id}", a.getPayment)
	return mux
}

// userOf returns the caller: the bearer token of the Authorization header
// (a stand-in for real authentication), or "anonymous" without one.
func userOf(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "anonymous", nil
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" || len(tok) > 64 {
		return "", fmt.Errorf("%w: Authorization must be \"Bearer <token>\" with at most 64 characters", httpidem.ErrUnauthenticated)
	}
	return tok, nil
}

func (a *app) createPayment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount *int64 `json:"amount"`
		// SlowMS holds the answer this long after the payment is made
		// (instead of -delay): a key that stays in flight, to watch with
		// idemctl or to crash the demo under.
		SlowMS int64 `json:"slow_ms"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Amount == nil || *req.Amount <= 0 || req.SlowMS < 0 || req.SlowMS > maxSlowMS {
		problem(w, http.StatusBadRequest, `The body must be JSON {"amount": <a positive integer, in cents>} with, optionally, "slow_ms": <0 to 600000>.`)
		return
	}
	user, err := userOf(r)
	if err != nil {
		problem(w, http.StatusUnauthorized, err.Error())
		return
	}
	if at, ok := idem.AttemptFrom(r.Context()); ok && at.Takeover {
		// Lease mode: a holder of this key lost its lease (crashed, hung)
		// before completing it, and its payment may exist. A real service
		// asks its provider by key here; the demo pays again, and says so.
		a.logger.WarnContext(r.Context(), "taking over a key whose earlier attempt may have paid",
			"attempt", at.Number, "fence", at.Fence)
		if a.logTakeover != nil {
			a.logTakeover(at)
		}
	}
	if a.beforeCreate != nil {
		if err := a.beforeCreate(r.Context()); err != nil {
			problem(w, http.StatusInternalServerError, "The payment could not be created; retry with the same key.")
			return
		}
	}
	p, err := a.ledger.create(r.Context(), user, *req.Amount)
	if err != nil {
		a.logger.ErrorContext(r.Context(), "create payment", "err", err)
		problem(w, http.StatusInternalServerError, "The payment could not be created; retry with the same key.")
		return
	}
	delay := a.delay
	if req.SlowMS > 0 {
		delay = time.Duration(req.SlowMS) * time.Millisecond
	}
	if delay > 0 {
		// The payment exists; the answer is late. A crash or a store outage
		// now must still never pay twice (in transactional mode: in lease
		// mode a crash here leaves a payment whose key lapses, and the
		// retry, a takeover, pays again).
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	w.Header().Set("Location", "/payments/"+strconv.FormatInt(p.ID, 10))
	writeJSON(w, http.StatusCreated, p)
}

func (a *app) listPayments(w http.ResponseWriter, r *http.Request) {
	ps, err := a.ledger.list(r.Context())
	if err != nil {
		a.logger.ErrorContext(r.Context(), "list payments", "err", err)
		problem(w, http.StatusInternalServerError, "The payments could not be listed.")
		return
	}
	if ps == nil {
		ps = []payment{}
	}
	writeJSON(w, http.StatusOK, ps)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func problem(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
	w.Header().Set("Content-Type", httpidem.ProblemContentType)
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// quoteIdent quotes a table name for SQLite and PostgreSQL.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

var errNoTx = errors.New("payments: not inside the idempotency transaction")

// maxSlowMS bounds a request's slow_ms: ten minutes.
const maxSlowMS = 600_000

// sqliteLedger keeps payments in a table of the store's SQLite database and
// writes them in the middleware's transaction (sqlite.TxFrom), or straight
// to the database when direct (lease mode).
type sqliteLedger struct {
	db     *sql.DB
	table  string
	direct bool
}

func newSQLiteLedger(ctx context.Context, db *sql.DB, table string) (*sqliteLedger, error) {
	t := quoteIdent(table)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		user_id TEXT    NOT NULL,
		amount  INTEGER NOT NULL)`); err != nil {
		return nil, fmt.Errorf("payments: create table: %w", err)
	}
	return &sqliteLedger{db: db, table: t}, nil
}

func (l *sqliteLedger) create(ctx context.Context, user string, amount int64) (payment, error) {
	var q interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	} = l.db
	if tx, ok := sqlite.TxFrom(ctx); ok {
		q = tx
	} else if !l.direct {
		return payment{}, errNoTx
	}
	var p payment
	err := q.QueryRowContext(ctx, `INSERT INTO `+l.table+` (user_id, amount) VALUES (?, ?) RETURNING id, amount`, user, amount).Scan(&p.ID, &p.Amount)
	return p, err
}

func (l *sqliteLedger) list(ctx context.Context) ([]payment, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, amount FROM `+l.table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ps []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.ID, &p.Amount); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// postgresLedger keeps payments in a table of the store's PostgreSQL
// database and writes them in the middleware's transaction (postgres.TxFrom),
// or straight to the database when direct (lease mode).
type postgresLedger struct {
	pool   *pgxpool.Pool
	table  string
	direct bool
}

func newPostgresLedger(ctx context.Context, pool *pgxpool.Pool, table string) (*postgresLedger, error) {
	t := quoteIdent(table)
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
		id      bigserial PRIMARY KEY,
		user_id text   NOT NULL,
		amount  bigint NOT NULL)`); err != nil {
		return nil, fmt.Errorf("payments: create table: %w", err)
	}
	return &postgresLedger{pool: pool, table: t}, nil
}

func (l *postgresLedger) create(ctx context.Context, user string, amount int64) (payment, error) {
	var q interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	} = l.pool
	if tx, ok := postgres.TxFrom(ctx); ok {
		q = tx
	} else if !l.direct {
		return payment{}, errNoTx
	}
	var p payment
	err := q.QueryRow(ctx, `INSERT INTO `+l.table+` (user_id, amount) VALUES ($1, $2) RETURNING id, amount`, user, amount).Scan(&p.ID, &p.Amount)
	return p, err
}

func (l *postgresLedger) list(ctx context.Context) ([]payment, error) {
	rows, err := l.pool.Query(ctx, `SELECT id, amount FROM `+l.table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ps []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.ID, &p.Amount); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// memLedger keeps payments in the process (memory and Redis stores, lease
// mode). Its ids come from this list, so with Redis they are per process: a
// demo, not a bank.
type memLedger struct {
	mu       sync.Mutex
	payments []payment
}

func (l *memLedger) create(ctx context.Context, user string, amount int64) (payment, error) {
	if err := ctx.Err(); err != nil {
		return payment{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := payment{ID: int64(len(l.payments)) + 1, Amount: amount}
	l.payments = append(l.payments, p)
	return p, nil
}

func (l *memLedger) list(context.Context) ([]payment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]payment(nil), l.payments...), nil
}
