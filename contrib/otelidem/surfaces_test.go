package otelidem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
)

// TestSurfacesCountAlike runs the same script (two first runs, one replay,
// one release) through httpidem, dedup, idem.Do and the engine itself, each with a
// Telemetry of its own surface attribute on one meter provider: every
// surface reports the same counts under the same instruments.
func TestSurfacesCountAlike(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	h := &harness{reader: reader}
	tel := func(surface string) *otelidem.Telemetry {
		tl, err := otelidem.New(otelidem.WithMeterProvider(mp), otelidem.WithAttributes(attribute.String("idem.surface", surface)))
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	ctx := context.Background()

	// HTTP: a 201 kept, its replay, a 500 released.
	he, err := idem.New(newMemory(t), idem.WithTracer(tel("http")))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpidem.New(he)
	if err != nil {
		t.Fatal(err)
	}
	hh := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	for _, c := range []struct{ path, key string }{{"/ok", "a"}, {"/ok", "a"}, {"/fail", "b"}} {
		r := httptest.NewRequest("POST", c.path, strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", c.key)
		hh.ServeHTTP(httptest.NewRecorder(), r)
	}

	// dedup: an event processed, its redelivery, a failing handler.
	dde, err := idem.New(newMemory(t), idem.WithTracer(tel("dedup")))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dedup.New(dde)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context) error { return nil }
	for _, c := range []struct {
		id string
		fn func(context.Context) error
	}{{"evt-a", ok}, {"evt-a", ok}, {"evt-b", func(context.Context) error { return errors.New("downstream said no") }}} {
		d.Process(ctx, c.id, c.fn)
	}

	// idem.Do with a typed result.
	de, err := idem.New(newMemory(t), idem.WithTracer(tel("do")))
	if err != nil {
		t.Fatal(err)
	}
	charge := func(context.Context) (int, error) { return 42, nil }
	idem.Do(ctx, de, "charge-a", charge)
	idem.Do(ctx, de, "charge-a", charge)
	idem.Do(ctx, de, "charge-b", func(context.Context) (int, error) { return 0, errors.New("card declined") })

	// The engine itself.
	e, err := idem.New(newMemory(t), idem.WithTracer(tel("engine")))
	if err != nil {
		t.Fatal(err)
	}
	keep := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }
	e.Run(ctx, "a", "fp", keep)
	e.Run(ctx, "a", "fp", keep)
	e.Run(ctx, "b", "fp", func(context.Context) idem.Verdict { return idem.Discard("no") })

	ms := h.metrics(t)
	for _, surface := range []string{"http", "dedup", "do", "engine"} {
		s := attribute.String("idem.surface", surface)
		got := [4]int64{
			sum(t, ms, "idem.claims", outcome(otelidem.OutcomeAcquired), s),
			sum(t, ms, "idem.claims", outcome(otelidem.OutcomeReplayed), s),
			sum(t, ms, "idem.settles", outcome(otelidem.OutcomeCompleted), s),
			sum(t, ms, "idem.settles", outcome(otelidem.OutcomeReleased), s),
		}
		if got != [4]int64{2, 1, 1, 1} {
			t.Errorf("%s: acquired, replayed, completed, released = %v, want [2 1 1 1]", surface, got)
		}
	}
}
