package otelidem_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idemkit/contrib/otelidem"
)

// harness is one Telemetry wired to an in-memory metric reader and a span
// recorder.
type harness struct {
	tel    *otelidem.Telemetry
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newHarness(t *testing.T, opts ...otelidem.Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		h.tp.Shutdown(context.Background())
	})
	tel, err := otelidem.New(append([]otelidem.Option{otelidem.WithMeterProvider(mp), otelidem.WithTracerProvider(h.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.tel = tel
	return h
}

// metrics collects the current state of every instrument.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds the points of a counter or up-down counter whose attributes
// include want.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, not an int64 sum", name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// hist returns the count and sum of a histogram's points whose attributes
// include want.
func hist(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, not a float64 histogram", name, m.Data)
	}
	var n uint64
	var s float64
	for _, p := range h.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
			s += p.Sum
		}
	}
	return n, s
}

func outcome(o string) attribute.KeyValue { return otelidem.AttrOutcome.String(o) }

// spanAttr returns a span's attribute by key.
func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}
