package otelidem_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

// BenchmarkRun compares, in one run, the engine on the memory store bare,
// with otelidem's metrics (spans not sampled), and with metrics and recorded
// spans: a new key per iteration (claim, work, complete), from parallel
// goroutines.
func BenchmarkRun(b *testing.B) {
	work := func(context.Context) idem.Verdict { return idem.Keep([]byte("ok")) }
	cases := []struct {
		name string
		opts func(b *testing.B) []idem.Option
	}{
		{"bare", func(*testing.B) []idem.Option { return nil }},
		{"metrics", func(b *testing.B) []idem.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
			tel, err := otelidem.New(otelidem.WithMeterProvider(mp), otelidem.WithTracerProvider(tp))
			if err != nil {
				b.Fatal(err)
			}
			return []idem.Option{idem.WithTracer(tel)}
		}},
		{"metrics+spans", func(b *testing.B) []idem.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
			tel, err := otelidem.New(otelidem.WithMeterProvider(mp), otelidem.WithTracerProvider(tp))
			if err != nil {
				b.Fatal(err)
			}
			return []idem.Option{idem.WithTracer(tel)}
		}},
	}
	for round := 0; round < 2; round++ { // interleaved: bare, metrics, spans, bare, ...
		for _, c := range cases {
			b.Run(c.name, func(b *testing.B) {
				st, err := memory.New()
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				e, err := idem.New(st, c.opts(b)...)
				if err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := e.Run(context.Background(), "k"+strconv.FormatInt(n.Add(1), 10), "fp", work); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// discardSpans records nothing: the spans are made and ended, then dropped.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
