// Package dedup makes a queue consumer or webhook handler apply each message
// once, even though the broker or the sender delivers it more than once.
//
// At-least-once systems (SQS, Kafka, RabbitMQ, NATS JetStream, Stripe and
// GitHub webhooks) redeliver a message whenever they are not sure it was
// handled: a consumer crashed before its ack, an ack was lost, a webhook
// answer came too late. Exactly-once delivery does not exist, but
// effectively-once processing does: at-least-once delivery plus a consumer
// that remembers which message ids it has processed. A Deduper remembers
// them in a store.Store (memory, SQLite, PostgreSQL, Redis):
//
//	e, err := idem.New(st) // lease, wait, retention, logger, tracer: once
//	if err != nil {
//		return err
//	}
//	d, err := dedup.New(e, dedup.WithScope("stripe"))
//	if err != nil {
//		return err
//	}
//	out, err := d.ProcessWith(ctx, event.ID, dedup.Fingerprint(event.Payload), func(ctx context.Context) error {
//		return applyEvent(ctx, event)
//	})
//	switch out.Action() {
//	case dedup.Ack: // Processed now, or a Duplicate of a processed event: ack / 2xx.
//	case dedup.Retry: // InFlight elsewhere, or Failed (err says why): nack / 5xx.
//	case dedup.DeadLetter: // Mismatch: the id came with another payload: dead-letter / 422.
//	}
//
// # Outcomes
//
// Process claims the id, runs fn, and records the id as processed; see
// Outcome for the results. A failed fn (an error or a panic) releases the
// id, so the redelivery runs fn again. Once fn has returned nil the id is
// recorded whatever happens to the caller's context, retrying a failing
// store for as long as the lease holds.
//
// Deduper is a thin adapter over package idem, the engine under every
// surface of idemkit: claim, heartbeat, settle and the slow-claim rule are
// idem's, the same as httpidem's, and the engine's tracer sees the same runs.
//
// # Fingerprints
//
// By default the id alone decides: a delivery of a processed id is a
// Duplicate whatever its payload. ProcessWith takes the payload's
// fingerprint (Fingerprint(payload)): a delivery of the id with another
// payload is then reported as Mismatch, not silently skipped.
//
// # Leases and the heartbeat
//
// Process holds the id with the engine's lease (idem.WithLease) while fn
// runs, and renews it every lease/2 with Store.Renew, so a slow consumer is never overtaken
// by a redelivery of the same message: the redelivery waits for it (the
// engine's idem.WithWait, 10 s by default), then sees Duplicate, or InFlight
// if the first delivery is still running. The
// lease only bounds how long a consumer that died mid-fn keeps the id. If a
// consumer is frozen for longer than the lease (its renewals could not run),
// a redelivery may claim the id and run fn; the frozen run then finds out at
// its next renewal (its context is cancelled) or when it tries to record the
// id, which the store refuses (fencing): it returns Failed with an error
// matching store.ErrLeaseLost, and the record stays the other delivery's.
// Lease mode cannot undo an effect that already left the process, so effects
// on other systems should carry the message id as their own idempotency key.
// fn learns from its context which claim of the id it runs under
// (idem.AttemptFrom): a redelivery that took over a frozen or dead
// consumer's lapsed lease has Attempt.Takeover set and a larger
// Attempt.Fence, and should look the effect up before acting again.
//
// # Transactions
//
// When the effect is a write to the same SQL database that holds the ids,
// ProcessTx (for stores implementing store.Transactor) records the id and
// fn's writes in one transaction: both commit or neither does, with no lease
// to lose. Process and ProcessTx run on the same Deduper and engine: the
// mode is chosen per call. This is the processed_events pattern: the event id is inserted
// under a unique key in the same transaction as the effect.
//
// # Choosing the retention
//
// A processed id is remembered for the engine's retention
// (idem.WithRetention, default idem.DefaultRetention, 24 h); a redelivery after that runs fn again. Set it longer
// than the longest time the broker may redeliver a message after its first
// delivery, with margin: the SQS queue's message retention period, a Kafka
// topic's retention if consumers may be rewound, a JetStream stream's MaxAge,
// the 3 days Stripe retries a webhook. An expired id counts as never seen
// at once on every store; reclaiming its space is the store's business:
// Redis expires keys itself, the memory store sweeps in the background, and
// the SQL stores delete expired rows when their Purge method runs (run
// package purge's job, or call it periodically, for example hourly).
//
// # Keys
//
// An id is recorded under keyer.ScopedKey(id, "dedup", scope), the one
// namespacing encoding of idemkit (see Deduper.Key). Ids from different sources should get different scopes
// (WithScope), since two senders may use the same ids.
//
// # Ids out of logs
//
// Ids and scopes may name customers or tenants, so log lines carry them
// only redacted ("id", "scope", and the engine's "key"), as does the text of
// every error Process returns or logs: by default as keyer.DefaultRedactor()
// writes them, "hmac:" and 32 hex digits of an HMAC with a secret drawn
// once per process. The engine's idem.WithKeyRedactor chooses another
// (keyer.RawKeys only by explicit choice). Tracers get the raw key, and the
// error fn returns is passed on as it is.
package dedup
