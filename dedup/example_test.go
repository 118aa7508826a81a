package dedup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/dedup"
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
// Retry-After while another delivery of it is being processed; 500 when it
// failed, so the sender retries.
func webhook(d *dedup.Deduper, l *ledger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.ID == "" {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		out, err := d.Process(r.Context(), ev.ID, func(ctx context.Context) error {
			if ev.Type != "payment.succeeded" {
				return nil // not for us; still recorded, so not reconsidered
			}
			l.credit(ev.Amount)
			return nil
		})
		switch out {
		case dedup.Processed, dedup.Duplicate:
			w.WriteHeader(http.StatusOK)
		case dedup.InFlight:
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusConflict)
		default: // dedup.Failed
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
	d, err := dedup.New(st, dedup.WithScope("stripe"))
	if err != nil {
		log.Fatal(err)
	}
	l := &ledger{}
	h := webhook(d, l)

	body := `{"id":"evt_1N2x","type":"payment.succeeded","amount":1990}`
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(body)))
		fmt.Println(rec.Code)
	}
	fmt.Println("balance:", l.balance)
	// Output:
	// 200
	// 200
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
	d, err := dedup.New(st, dedup.WithScope("orders-queue"))
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
		if out.Ack() {
			fmt.Printf("%s: %v, ack\n", id, out)
		} else {
			fmt.Printf("%s: %v (%v), nack\n", id, out, err)
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
