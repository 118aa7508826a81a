// Package seedtest is the seeds' exercise, for tests only: the payments
// route behind httpidem and a de-duplicated consumer, on any store.Store.
// Backends in nested modules (which cannot import examples/payments) run it
// from their own tests on a store opened from their URL, so every backend
// shows the same client-visible behaviour:
//
//   - ten parallel identical POSTs with one key make one payment, and every
//     answer is the same 201;
//   - a retry of the same request replays the first answer;
//   - the same key with another body is refused with 422;
//   - ten parallel deliveries of one message apply it once.
package seedtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// Run runs the exercise on st, with keys unique to this call. The handler
// takes 50 ms, so the parallel duplicates really meet it in flight.
func Run(t *testing.T, st store.Store) {
	t.Helper()
	t.Run("HTTP", func(t *testing.T) { runHTTP(t, st) })
	t.Run("Dedup", func(t *testing.T) { runDedup(t, st) })
}

type answer struct {
	status   int
	body     string
	replayed bool
}

// handler builds the payments route on st; the middleware's construction
// is here alone, so an API change is mended in one place.
func handler(t *testing.T, st store.Store, payments *atomic.Int64) http.Handler {
	t.Helper()
	e, err := idem.New(st)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	mw, err := httpidem.New(e)
	if err != nil {
		t.Fatalf("httpidem.New: %v", err)
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(50 * time.Millisecond)
		id := payments.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"request":%q}`, id, body)
	}))
}

func post(t *testing.T, url, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST: %v", err)
		return answer{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("reading the answer: %v", err)
	}
	return answer{resp.StatusCode, string(b), resp.Header.Get(httpidem.ReplayedHeader) == "true"}
}

func runHTTP(t *testing.T, st store.Store) {
	var payments atomic.Int64
	srv := httptest.NewServer(handler(t, st, &payments))
	t.Cleanup(srv.Close)
	url := srv.URL + "/payments"
	key := "seed-" + string(store.NewToken())
	const body = `{"amount":1990}`

	answers := make([]answer, 10)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = post(t, url, key, body) })
	}
	wg.Wait()
	if n := payments.Load(); n != 1 {
		t.Fatalf("ten parallel POSTs with one key made %d payments; want 1", n)
	}
	for i, a := range answers {
		if a.status != http.StatusCreated || a.body != answers[0].body {
			t.Errorf("answer %d = %d %q; want 201 %q like the first", i, a.status, a.body, answers[0].body)
		}
	}

	retry := post(t, url, key, body)
	if retry.status != http.StatusCreated || retry.body != answers[0].body || !retry.replayed {
		t.Errorf("retry = %d %q replayed=%v; want the first answer, replayed", retry.status, retry.body, retry.replayed)
	}
	if other := post(t, url, key, `{"amount":5}`); other.status != http.StatusUnprocessableEntity {
		t.Errorf("same key, another body = %d %q; want 422", other.status, other.body)
	}
	if n := payments.Load(); n != 1 {
		t.Errorf("after the retry and the other body: %d payments; want 1", n)
	}
}

// newDeduper builds the consumer's de-duplicator on st; its construction is
// here alone, like the middleware's.
func newDeduper(t *testing.T, st store.Store) *dedup.Deduper {
	t.Helper()
	e, err := idem.New(st)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	d, err := dedup.New(e, dedup.WithScope("seedtest"))
	if err != nil {
		t.Fatalf("dedup.New: %v", err)
	}
	return d
}

func runDedup(t *testing.T, st store.Store) {
	d := newDeduper(t, st)
	id := "evt-" + string(store.NewToken())
	var applied atomic.Int64
	var wg sync.WaitGroup
	var acked atomic.Int64
	for range 10 {
		wg.Go(func() {
			for {
				out, err := d.Process(t.Context(), id, func(context.Context) error {
					time.Sleep(20 * time.Millisecond)
					applied.Add(1)
					return nil
				})
				switch out.Action() {
				case dedup.Ack:
					acked.Add(1)
					return
				case dedup.DeadLetter:
					t.Errorf("Process: %v: dead-lettered", out)
					return
				}
				if err != nil {
					t.Errorf("Process: %v, %v", out, err)
					return
				}
				time.Sleep(10 * time.Millisecond) // in flight elsewhere: redelivered later
			}
		})
	}
	wg.Wait()
	if n := applied.Load(); n != 1 {
		t.Errorf("ten deliveries of one message applied it %d times; want 1", n)
	}
	if n := acked.Load(); n != 10 {
		t.Errorf("%d of ten deliveries acked; want all", n)
	}
}
