package otelidem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
)

// TestHTTPScriptedRun is the scripted run through httpidem on the
// memory store: N first requests, M replays, one 409, one 422, one release.
// Every count is read back exactly, and the spans hang under each request's
// span.
func TestHTTPScriptedRun(t *testing.T) {
	const N, M = 6, 9
	h := newHarness(t, otelidem.WithBackend("memory"), otelidem.WithAttributes(attribute.String("idem.surface", "http")))
	st := newMemory(t)
	e, err := idem.New(st, idem.WithTracer(h.tel), idem.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpidem.New(e)
	if err != nil {
		t.Fatal(err)
	}
	entered, finish := make(chan struct{}), make(chan struct{})
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			close(entered)
			<-finish
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable) // not kept: the key is released
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	tracer := h.tp.Tracer("test")
	do := func(path, key, body string) int {
		ctx, span := tracer.Start(context.Background(), "POST "+path)
		defer span.End()
		r := httptest.NewRequestWithContext(ctx, "POST", path, strings.NewReader(body))
		r.Header.Set("Idempotency-Key", key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w.Code
	}
	for i := range N {
		if c := do("/payments", fmt.Sprintf("key-%d", i), `{"amount":1}`); c != 201 {
			t.Fatalf("first request %d: %d", i, c)
		}
	}
	for i := range M {
		if c := do("/payments", fmt.Sprintf("key-%d", i%N), `{"amount":1}`); c != 201 {
			t.Fatalf("replay %d: %d", i, c)
		}
	}
	if c := do("/payments", "key-0", `{"amount":2}`); c != 422 {
		t.Fatalf("another body with key-0: %d, want 422", c)
	}
	if c := do("/fail", "key-fail", `{}`); c != 503 {
		t.Fatalf("/fail: %d, want 503", c)
	}
	done := make(chan int, 1)
	go func() { done <- do("/slow", "key-slow", `{}`) }()
	<-entered
	if c := do("/slow", "key-slow", `{}`); c != 409 {
		t.Fatalf("duplicate of a request in flight: %d, want 409", c)
	}
	close(finish)
	if c := <-done; c != 201 {
		t.Fatalf("/slow: %d", c)
	}

	ms := h.metrics(t)
	surface := attribute.String("idem.surface", "http")
	for o, want := range map[string]int64{
		otelidem.OutcomeAcquired:   N + 2,
		otelidem.OutcomeReplayed:   M,
		otelidem.OutcomeInProgress: 1,
		otelidem.OutcomeMismatch:   1,
	} {
		if got := sum(t, ms, "idem.claims", outcome(o), surface); got != want {
			t.Errorf("idem.claims{%s} = %d, want %d", o, got, want)
		}
	}
	for o, want := range map[string]int64{
		otelidem.OutcomeCompleted: N + 1,
		otelidem.OutcomeReleased:  1,
		otelidem.OutcomeLeaseLost: 0,
	} {
		if got := sum(t, ms, "idem.settles", outcome(o), surface); got != want {
			t.Errorf("idem.settles{%s} = %d, want %d", o, got, want)
		}
	}
	if n := sum(t, ms, "idem.inflight"); n != 0 {
		t.Errorf("in flight after the run: %d", n)
	}
	if n, _ := hist(t, ms, "idem.work.duration", surface); n != N+2 {
		t.Errorf("work durations: %d, want %d", n, N+2)
	}

	// Every idem span is the child of its request's span.
	requests := map[string]bool{}
	for _, s := range h.spans.Ended() {
		if strings.HasPrefix(s.Name(), "POST ") {
			requests[s.SpanContext().SpanID().String()] = true
		}
	}
	runs := map[string]bool{}
	for _, s := range h.spans.Ended() {
		if s.Name() == "idem.run" && requests[s.Parent().SpanID().String()] {
			runs[s.SpanContext().SpanID().String()] = true
		}
	}
	claims, settles := 0, 0
	for _, s := range h.spans.Ended() {
		switch s.Name() {
		case "idem.claim":
			claims++
		case "idem.settle":
			settles++
		default:
			continue
		}
		if !runs[s.Parent().SpanID().String()] {
			t.Errorf("%s span has no run span under a request span as its parent", s.Name())
		}
	}
	if claims != N+M+4 || settles != N+2 {
		t.Errorf("%d claim spans and %d settle spans, want %d and %d", claims, settles, N+M+4, N+2)
	}
}
