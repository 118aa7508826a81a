package dedup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

// event is a webhook payload, shaped like Stripe's: the sender's event id
// names the event across every delivery of it.
type event struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Amount int    `json:"amount"`
}

// ledger is the effect: crediting an amount is not idempotent by itself.
type ledger struct {
	mu      sync.Mutex
	balance int
}

func (l *ledger) credit(amount int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.balance += amount
}

// webhook answers the sender from the Outcome: 200 when the event is
// processed (now or before), so the sender stops retrying; 409 with
// Retry-After while another delivery of it is still being processed; 422
// for an id reused with another payload (never retried); 500 when it
// failed, so the sender retries.
func webhook(d *dedup.Deduper, l *ledger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read the event", http.StatusBadRequest)
			return
		}
		var ev event
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		out, err := d.ProcessWith(r.Context(), ev.ID, dedup.Fingerprint(body), func(ctx context.Context) error {
			if ev.Type != "payment.succeeded" {
				return nil // not for us; still recorded, so not reconsidered
			}
			l.credit(ev.Amount)
			return nil
		})
		switch out.Action() {
		case dedup.Ack: // Processed, or a Duplicate of a processed event
			w.WriteHeader(http.StatusOK)
		case dedup.DeadLetter: // Mismatch: the id came with another payload
			http.Error(w, "event id reused with another payload", http.StatusUnprocessableEntity)
		case dedup.Retry: // InFlight (after the engine's wait) or Failed
			if out == dedup.InFlight {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusConflict)
				return
			}
			log.Printf("webhook %s: %v", ev.ID, err)
			http.Error(w, "try again", http.StatusInternalServerError)
		}
	})
}

// A webhook sender delivers the same event twice (its first delivery timed
// out on its side); the handler credits the amount once.
func Example_webhook() {
	st, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		log.Fatal(err)
	}
	d, err := dedup.New(e, dedup.WithScope("stripe"))
	if err != nil {
		log.Fatal(err)
	}
	l := &ledger{}
	h := webhook(d, l)

	body := `{"id":"evt_1N2x","type":"payment.succeeded","amount":1990}`
	forged := `{"id":"evt_1N2x","type":"payment.succeeded","amount":99000}`
	for _, b := range []string{body, body, forged} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(b)))
		fmt.Println(rec.Code)
	}
	fmt.Println("balance:", l.balance)
	// Output:
	// 200
	// 200
	// 422
	// balance: 1990
}

// A queue consumer acks what was processed or was a duplicate, and leaves
// the rest for redelivery. Here the broker redelivers m1, and m2 fails once.
func ExampleDeduper_Process() {
	st, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		log.Fatal(err)
	}
	d, err := dedup.New(e, dedup.WithScope("orders-queue"))
	if err != nil {
		log.Fatal(err)
	}
	failedOnce := false
	handle := func(ctx context.Context, id string) error {
		if id == "m2" && !failedOnce {
			failedOnce = true
			return errors.New("inventory service unavailable")
		}
		fmt.Println("  shipping order for", id)
		return nil
	}

	for _, id := range []string{"m1", "m2", "m1", "m2"} {
		out, err := d.Process(context.Background(), id, func(ctx context.Context) error {
			return handle(ctx, id)
		})
		switch out.Action() {
		case dedup.Ack:
			fmt.Printf("%s: %v, ack\n", id, out)
		case dedup.Retry:
			fmt.Printf("%s: %v (%v), nack\n", id, out, err)
		case dedup.DeadLetter:
			fmt.Printf("%s: %v, dead-letter\n", id, out)
		}
	}
	// Output:
	//   shipping order for m1
	// m1: processed, ack
	// m2: failed (inventory service unavailable), nack
	// m1: duplicate, ack
	//   shipping order for m2
	// m2: processed, ack
}
