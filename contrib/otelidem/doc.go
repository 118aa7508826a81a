// Package otelidem reports what idemkit does with every key as OpenTelemetry
// metrics and traces: how many claims were acquired, replayed, found in
// progress (HTTP 409) or mismatched (HTTP 422), how each run was settled,
// how long the work, the settle and every store call took, how much work is
// in flight, and how many records the cleanup job purged.
//
// A Telemetry is the engine's tracer (idem.WithTracer), its one
// instrumentation point, so the HTTP middleware, message de-duplication,
// gRPC calls and idem.Do are counted alike:
//
//	tel, err := otelidem.New(otelidem.WithBackend("postgres"))
//	eng, err := idem.New(st, idem.WithTracer(tel))
//	if p, ok := st.(store.Purger); ok {
//		go purge.Run(ctx, p, purge.WithObserver(tel.PurgeObserver()))
//	}
//
// Metrics go to the global MeterProvider unless WithMeterProvider says
// otherwise, spans to the global TracerProvider (WithTracerProvider); read
// them with any OpenTelemetry exporter, Prometheus included (see the example
// module under example/).
//
// # Metrics
//
//	idem.claims          counter  idem.outcome: acquired, replayed, in_progress, mismatch, slow_claim, store_error
//	idem.settles         counter  idem.outcome: completed, not_kept, released, lease_lost, unknown, failed
//	idem.waits           counter  claims that found the key in progress and waited (idem.WithWait)
//	idem.renewals        counter  lease renewals
//	idem.inflight        up-down  runs holding a key: acquired, not yet settled
//	idem.inflight.oldest_age  gauge, s: age of the oldest run holding a key (0: none)
//	idem.takeovers       counter  claims that took over a key whose holder's lease lapsed
//	idem.work.duration   histogram, s: from acquiring the key to the first settle call
//	idem.settle.duration histogram, s: from the first settle call to the settle's end (retries and commit included)
//	idem.store.duration  histogram, s  idem.op (claim, renew, complete, release, tx), idem.store, error
//	idem.store.errors    counter  idem.op, idem.store
//	idem.purge.deleted   counter  records the cleanup job deleted
//	idem.purge.runs      counter  idem.result: ok, error
//	idem.purge.duration  histogram, s
//
// Every metric also carries the attributes given with WithAttributes (for
// example the surface: http, dedup). Keys never reach metrics.
//
// # Traces
//
// Every run is a span, "idem.run", started in TraceRunStart as a child of
// the caller's span (the request's, with otelhttp): the work runs in its
// context, so every span the work starts (a database query, a call to a
// payment provider) is a child of it. Under it, the claim and the settle
// are spans too ("idem.claim", "idem.settle"). Each carries the outcome in
// idem.outcome and the key, hashed by default (keyer.Redactor), in
// idem.key.
//
// # What it measures exactly
//
// Counts are exact: each comes from one engine event. In-flight work and the
// work and settle durations are joined by the run itself, whose state rides
// in the context TraceRunStart returned: no map of keys, nothing to sweep.
//
// idem.takeovers counts the Acquired events whose idem.Attempt is a
// takeover (Attempt.Takeover: the key's earlier holder lost its lease before
// completing it, so its work may have run). Any rate above zero means
// holders crash, hang or outlive their lease.
//
// idem.inflight.oldest_age is observed at each collection: the time since
// the oldest run still holding its key acquired it, from the Acquired event
// to the event that settles the run (Completed, Released, LeaseLost,
// Unknown, a failed release) or, failing one, TraceRunEnd. The runs in flight
// are kept in sharded min-heaps: O(log n) per run, one entry per run in
// flight and none once it ends. A value far above the lease means a work
// that keeps renewing its lease and never finishes.
package otelidem
