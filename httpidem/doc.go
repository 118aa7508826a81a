// Package httpidem is net/http middleware that makes a POST (or PATCH) safe to
// retry: the first request with an Idempotency-Key runs the handler, and every
// retry with the same key gets the first response back instead of running it
// again.
//
//	e, err := idem.New(st) // lease, wait, retention, logger, tracer: set once
//	if err != nil {
//		return err
//	}
//	mw, err := httpidem.New(e, httpidem.WithScope(userOf)) // userOf(r) ([]string, error): the tenant, the user
//	if err != nil {
//		return err
//	}
//	http.Handle("POST /payments", mw(createPayment))
//
// New takes the configured *idem.Engine and returns a
// func(http.Handler) http.Handler, so it fits net/http, chi and anything
// else that takes handlers, and an error for a nil engine or an invalid
// option. The middleware is a thin adapter over package idem, the engine
// under every surface of idemkit (dedup, grpcidem and idem.Do too): claim,
// lease renewal, the wait for a key in flight, settle rules and the
// slow-claim rule are idem's, and so are the logger, the key redactor and
// the tracer. Its own options are the HTTP ones: methods, scope,
// fingerprinter, kept statuses, replay headers, response limit, optional
// key, fail-open, transactions. It follows the IETF draft "The
// Idempotency-Key HTTP Header Field" (draft-ietf-httpapi-idempotency-key-header).
//
// # What a client gets
//
//	situation                                         status  notes
//	method not configured (GET, ...)                  —       handler runs, untouched
//	no Idempotency-Key                                400     (handler runs unprotected with WithOptionalKey)
//	malformed key, several keys, empty, "null"        400     detail says what is wrong
//	request body over the fingerprint limit           413
//	first request                                     handler the handler's response, kept if WithKeep allows
//	retry after a kept response                       stored  same status, headers, body; Idempotent-Replayed: true
//	same key, different method/path/body              422
//	same key while the first is still running         stored  waits for it (idem.WithWait, 10 s by default), then replays
//	... still running when the wait is over           409     Retry-After: 1 or 2 (a short hint, never the lease)
//	store unavailable                                 503     handler not run (WithFailOpen runs it unprotected)
//	transaction failed to commit after the handler    503     the handler's response is never sent
//	scope function failed, or scope too long          500     (401 if it returns ErrUnauthenticated)
//	stored response unreadable                        500
//	response too large to keep, transactional mode    500     handler cancelled, rolled back
//	retry after a response too large to keep (lease)  410     done, response not kept: never run again
//
// Every error the middleware writes itself is an RFC 9457 problem,
// Content-Type application/problem+json, with a stable "code" member (the
// Code* constants).
//
// # Security: scope your keys
//
// Keys are chosen by clients. Without WithScope they are global: a client
// that sends another client's key with the same request body receives the
// other client's stored response. Any service with more than one client MUST
// pass WithScope with the authenticated user or tenant, taken from your
// authentication, never from something the client merely asserts.
//
// # Which responses are kept
//
// By default every response except 5xx and 429 is kept and replayed for the
// engine's retention (idem.WithRetention, 24h). The key is released, so the retry runs the handler
// for real, only when the handler says its effect did not happen: a status
// outside WithKeep, or a panic (the key is released, then the panic goes
// on). Everything else is kept, because its effect may have happened: a
// client that hung up (the stored response is what the handler wrote, not
// what the dead connection accepted), a handler that wrote nothing (an
// implicit 200), a response too large to keep. A client that hangs up after
// the handler returned changes nothing, in either mode: the response is
// kept (transactional mode commits on a context detached from the
// client's, bounded by the lease), nothing is logged as an error, and a
// retry replays it. In lease mode a response body over WithMaxResponse
// (1 MiB) is sent, and the key is recorded as done
// without it: retries get 410 with code idempotency-response-not-kept,
// never a second run. A 101 Switching Protocols is recorded the same way;
// other 1xx are passed on and never kept as the final answer.
//
// Set-Cookie, hop-by-hop headers, Date and per-request ids
// (DefaultNotReplayed) are never stored; WithReplayHeaders and
// WithoutReplayHeaders tune the rest. Trailers are stored and replayed as
// trailers, judged by the same lists under their own names (a Set-Cookie
// trailer is never kept). The writer the handler gets has no Unwrap, so
// nothing can reach the client around the capture; http.ResponseController
// still works (Flush, deadlines, full duplex are forwarded).
//
// The handler reads the body the fingerprint already read, from memory:
// r.Body is an io.Seeker and an io.WriterTo (a handler run again in
// transactional mode reads it from the start). In lease mode it is read
// from a pooled buffer and, like the writer, cut off when the handler
// returns: net/http forbids reading a body after that, and here such a
// read fails rather than see the next request's.
//
// # Two modes
//
// Lease mode, the default, for every store and for effects outside the
// database: claim the key with a lease, run the handler (its output streams
// to the client and is captured as it goes), then store the response or
// release the key. The client has its answer when the handler returns,
// whatever storing it then takes: a response the handler did not stream
// (up to 4 KiB, not flushed) is sent whole with a Content-Length and
// flushed before the key is recorded; a streamed one is flushed, and its
// chunked end follows the record. A retry that comes in that moment finds
// the key in flight and waits for the record (idem.WithWait), then replays. A heartbeat renews the lease every half lease from the
// claim until the key is settled, independently of the request's context:
// a client that goes away cancels the handler's context, never the renewal.
// Renewal is Store.Renew, which never brings a released key back. If the
// key turns out to be held by another claim or its lease lapsed in the
// store, or renewals fail until the lease has run out, the handler's
// context is cancelled with
// store.ErrLeaseLost as its cause (context.Cause), a LeaseLost event is
// reported, and the response is not kept. Storing the response is retried
// with backoff for as long as the lease holds, so a store restart or pause
// of a few seconds between the handler and the store never lets a retry run
// the handler again. Give long handlers a lease with margin and forward the
// key to external providers. A handler learns which claim of its key it
// runs under with idem.AttemptFrom(r.Context()): a takeover (Attempt.Takeover:
// an earlier holder's lease lapsed mid-handler) should look its effect up
// before acting again, and Attempt.Fence can guard its own writes.
//
// Transactional mode, chosen with WithTransactions (the store must be a
// store.Transactor; New fails otherwise) or WithTransactionsIfSupported
// (transactions where the store has them, leases elsewhere): claim, handler
// and the stored response run in ONE database transaction, and the handler
// gets that transaction from its request context for its own writes
// (postgres.Querier(r.Context(), pool), sqlite.Querier, mysql.Querier: the
// transaction when there is one, else the pool, so one handler runs
// transactionally on postgres:// and in lease mode on memory://). The response is
// buffered, at most WithMaxResponse bytes, and sent only after the commit,
// so a client never sees a success for a rolled-back transaction. A response
// that is not kept, a panic, a response past the limit, or a failed commit
// rolls everything back. A concurrent duplicate waits on the key's row, then
// replays. The lease is not renewed while the handler runs (the transaction
// keeps everyone else out of the key, and a driver's transaction is not safe
// for concurrent use); when the handler ran past half the lease it is
// renewed once, in the transaction, just before Complete. It is never chosen
// by the store's type: on SQLite it holds the database's only write lock for
// the whole handler, and a handler that does not write through TxFrom gains
// nothing from it.
//
// # Observability
//
// The engine's tracer (idem.WithTracer) sees every request's run: its
// TraceRunStart gets the request's context and returns the one the handler
// runs in (so a span it starts is the parent of the handler's spans), its
// TraceRunEnd gets the outcome (replayed, in progress, mismatch, completed,
// released), and an idem.EventTracer sees renewals, waits and store calls.
// RequestFrom(ctx) gives a tracer the request. HTTP requests, dedup
// messages, gRPC calls and idem.Do calls are traced alike.
//
// # Keys out of logs
//
// A store key holds the client's key and the scope WithScope added (a
// tenant, a user). Log lines, the middleware's and the engine's, go to the
// engine's logger and carry the key only redacted, under the attribute
// "key", and so does the text of every error they log, a store's error
// quoting the key included: by default as keyer.DefaultRedactor() writes
// it, "hmac:" and 32 hex digits of an HMAC with a secret drawn once per
// process. The engine's idem.WithKeyRedactor chooses another. Tracers get
// the raw key: they are your own code, which redacts what it exports
// (otelidem does). The error of a WithScope function is logged as it is.
package httpidem
