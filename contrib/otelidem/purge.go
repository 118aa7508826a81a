package otelidem

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/idemkit/idemkit/purge"
)

// PurgeObserver returns the cleanup job's observer: pass it to purge.Run or
// purge.New with purge.WithObserver. Every run adds what it deleted to
// idem.purge.deleted (a failed run too: what it deleted stays deleted),
// counts in idem.purge.runs by result and records its duration.
func (t *Telemetry) PurgeObserver() purge.Observer {
	ok := metric.WithAttributes(append(t.attrs(), t.storeAttrs, AttrResult.String("ok"))...)
	failed := metric.WithAttributes(append(t.attrs(), t.storeAttrs, AttrResult.String("error"))...)
	store := metric.WithAttributes(append(t.attrs(), t.storeAttrs)...)
	return func(ctx context.Context, r purge.Result) {
		if r.Deleted > 0 {
			t.purged.Add(ctx, r.Deleted, store)
		}
		res := ok
		if r.Err != nil {
			res = failed
		}
		t.purgeRuns.Add(ctx, 1, res)
		t.purgeDur.Record(ctx, r.Took.Seconds(), res)
	}
}
