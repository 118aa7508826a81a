// Command webhook is a webhook receiver that applies each event once, however
// many times the sender delivers it: the event id and the event's effect (a
// row in the credits table) commit in one SQLite transaction, through
// dedup.ProcessTx.
//
//	go run ./examples/webhook -addr :3001 -db webhook.db
//	curl -si -X POST localhost:3001/webhook -d '{"id":"evt_1","type":"payment.succeeded","amount":1990}'
//	curl -si -X POST localhost:3001/webhook -d '{"id":"evt_1","type":"payment.succeeded","amount":1990}'
//	curl -s localhost:3001/balance     # {"credits":1,"balance":1990}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store/sqlite"
)

func main() {
	addr := flag.String("addr", ":3001", "address to listen on")
	db := flag.String("db", "webhook.db", "SQLite database file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *db); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

// run serves the receiver on addr until ctx ends.
func run(ctx context.Context, addr, dbPath string) error {
	st, err := sqlite.Open(dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := newReceiver(ctx, st, slog.Default())
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("webhook receiver listening", "addr", addr, "db", dbPath)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// schema is the effect table: one row per applied credit. It has no unique
// constraint of its own: dedup is what keeps an event from being applied
// twice.
const schema = `CREATE TABLE IF NOT EXISTS credits (
	event_id   TEXT    NOT NULL,
	amount     INTEGER NOT NULL,
	applied_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
)`

// event is the payload a sender posts, shaped like a Stripe event.
type event struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Amount int64  `json:"amount"`
}

// receiver handles POST /webhook and GET /balance.
type receiver struct {
	st  *sqlite.Store
	d   *dedup.Deduper
	log *slog.Logger
}

// newReceiver creates the tables (the store's and credits) and returns the
// HTTP handler.
func newReceiver(ctx context.Context, st *sqlite.Store, log *slog.Logger) (http.Handler, error) {
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	if _, err := st.DB().ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("create credits: %w", err)
	}
	// The retention outlives the sender's retry window (Stripe: 3 days).
	e, err := idem.New(st, idem.WithRetention(7*24*time.Hour), idem.WithLogger(log))
	if err != nil {
		return nil, err
	}
	d, err := dedup.New(e, dedup.WithScope("stripe"))
	if err != nil {
		return nil, err
	}
	r := &receiver{st: st, d: d, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook", r.webhook)
	mux.HandleFunc("GET /balance", r.balance)
	return mux, nil
}

// webhook applies the event once. The status tells the sender what the
// outcome's Action says: 200 for processed and duplicate (Ack: stop
// retrying), 409 with Retry-After while another delivery of the same event
// is still being processed, 500 when processing failed (Retry: nothing was
// written), 422 for a dead letter.
func (rc *receiver) webhook(w http.ResponseWriter, r *http.Request) {
	var ev event
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&ev); err != nil || ev.ID == "" {
		http.Error(w, "expected a JSON event with an id", http.StatusBadRequest)
		return
	}
	out, err := rc.d.ProcessTx(r.Context(), ev.ID, func(ctx context.Context) error {
		if ev.Type != "payment.succeeded" {
			return nil // recorded as processed, nothing to apply
		}
		if ev.Amount <= 0 {
			return errors.New("payment.succeeded without a positive amount")
		}
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO credits (event_id, amount) VALUES (?, ?)", ev.ID, ev.Amount)
		return err
	})
	switch out.Action() {
	case dedup.Ack: // processed now, or a duplicate of a processed event
		writeJSON(w, http.StatusOK, map[string]string{"id": ev.ID, "status": out.String()})
	case dedup.DeadLetter: // never with ProcessTx; with ProcessWith, a reused id
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"id": ev.ID, "status": out.String()})
	case dedup.Retry:
		if out == dedup.InFlight { // still running after the engine's wait
			w.Header().Set("Retry-After", "2")
			writeJSON(w, http.StatusConflict, map[string]string{"id": ev.ID, "status": out.String()})
			return
		}
		// The id is logged hashed, as dedup logs it (its error names the
		// id hashed too): event ids can name the sender's customers.
		rc.log.Error("webhook failed", "id", keyer.DefaultRedactor()(ev.ID), "error", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"id": ev.ID, "status": out.String()})
	}
}

// balance reports how many credits were applied and their sum.
func (rc *receiver) balance(w http.ResponseWriter, r *http.Request) {
	var n, sum int64
	err := rc.st.DB().QueryRowContext(r.Context(), "SELECT count(*), coalesce(sum(amount), 0) FROM credits").Scan(&n, &sum)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"credits": n, "balance": sum})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
