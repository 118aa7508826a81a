package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxAmount is the largest payment the pretend bank accepts, in cents.
const maxAmount = 100_000

// payment is what POST /payments creates.
type payment struct {
	ID     int64 `json:"id"`
	Amount int64 `json:"amount"`
}

// ledger keeps the payments in the process: the example is about the
// middleware's operations, not about the payments.
type ledger struct {
	delay    time.Duration
	mu       sync.Mutex
	payments []payment
}

func (l *ledger) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount int64 `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
		http.Error(w, `the body must be {"amount": <positive cents>}`, http.StatusBadRequest)
		return
	}
	if req.Amount > maxAmount {
		// The bank said no: nothing was charged, so the 502 releases the key
		// and a retry runs again.
		http.Error(w, "the bank declined the payment", http.StatusBadGateway)
		return
	}
	if l.delay > 0 {
		t := time.NewTimer(l.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			http.Error(w, "client gone before the payment was made", http.StatusServiceUnavailable)
			return
		}
	}
	l.mu.Lock()
	p := payment{ID: int64(len(l.payments) + 1), Amount: req.Amount}
	l.payments = append(l.payments, p)
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/"+strconv.FormatInt(p.ID, 10))
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(p)
}

func (l *ledger) list(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	ps := append([]payment{}, l.payments...)
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ps)
}
