package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// fakeDemo is a tiny stand-in for examples/payments. With dedup false it
// makes a payment for every request, the bug the load test exists to catch.
type fakeDemo struct {
	dedup    bool
	mu       sync.Mutex
	payments []int
	byKey    map[string]int
}

func (f *fakeDemo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodGet {
		json.NewEncoder(w).Encode(map[string]any{"payments": f.payments})
		return
	}
	var body struct{ Amount int }
	json.NewDecoder(r.Body).Decode(&body)
	key := r.Header.Get("Idempotency-Key")
	if id, ok := f.byKey[key]; ok && f.dedup {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": %d, "amount": %d}`, id, body.Amount)
		return
	}
	f.payments = append(f.payments, body.Amount)
	id := len(f.payments)
	f.byKey[key] = id
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id": %d, "amount": %d}`, id, body.Amount)
}

func runAgainst(t *testing.T, dedup bool) Report {
	t.Helper()
	srv := httptest.NewServer(&fakeDemo{dedup: dedup, byKey: map[string]int{}})
	t.Cleanup(srv.Close)
	rep, err := Run(context.Background(), Config{URL: srv.URL, Clients: 8, Keys: 200, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	return rep
}

func TestCorrectServerPasses(t *testing.T) {
	rep := runAgainst(t, true)
	if !rep.OK() {
		t.Fatalf("violations against a correct server: %v", rep.Violations)
	}
	if rep.Keys != 200 || rep.Payments != 200 || rep.Replayed == 0 || rep.Requests <= 200 {
		t.Fatalf("report %+v: want 200 keys and payments, some replays, more requests than keys", rep)
	}
}

func TestDoubleChargingServerFails(t *testing.T) {
	rep := runAgainst(t, false)
	if rep.OK() {
		t.Fatal("a server that charges every retry passed the load test")
	}
	if !strings.Contains(strings.Join(rep.Violations, "\n"), "payments were made for") {
		t.Fatalf("violations %v do not name the extra payments", rep.Violations)
	}
}
