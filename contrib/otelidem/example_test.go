package otelidem_test

import (
	"context"
	"fmt"
	"sort"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

// The engine's tracer counts every claim by outcome; here the metrics are
// read back with the SDK's manual reader (a service uses an exporter, such
// as Prometheus: see the example module).
func ExampleTelemetry() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	tel, err := otelidem.New(otelidem.WithMeterProvider(mp), otelidem.WithBackend("memory"))
	if err != nil {
		panic(err)
	}

	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := idem.New(st, idem.WithTracer(tel))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	work := func(context.Context) idem.Verdict { return idem.Keep([]byte("done")) }
	e.Run(ctx, "order-1", "fp", work)    // runs
	e.Run(ctx, "order-1", "fp", work)    // replays
	e.Run(ctx, "order-1", "fp", work)    // replays
	e.Run(ctx, "order-1", "other", work) // mismatch (HTTP 422)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "idem.claims" {
			continue
		}
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			o, _ := p.Attributes.Value(otelidem.AttrOutcome)
			lines = append(lines, fmt.Sprintf("idem.claims{%s} %d", o.AsString(), p.Value))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// idem.claims{acquired} 1
	// idem.claims{mismatch} 1
	// idem.claims{replayed} 2
}
