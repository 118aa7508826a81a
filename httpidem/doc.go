// Package httpidem is net/http middleware that makes a POST (or PATCH) safe to
// retry: the first request with an Idempotency-Key runs the handler, and every
// retry with the same key gets the first response back instead of running it
// again.
//
//	mw := httpidem.New(st, httpidem.WithScope(userID))
//	http.Handle("POST /payments", mw(createPayment))
//
// New returns a func(http.Handler) http.Handler, so it fits net/http, chi
// and anything else that takes handlers. It follows the IETF draft "The
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
//	same key while the first is still running         409     Retry-After from the lease; or wait (WithWait) and replay
//	store unavailable                                 503     handler not run (WithFailOpen runs it unprotected)
//	transaction failed to commit after the handler    503     the handler's response is never sent
//	scope function failed, or scope too long          500     (401 if it returns ErrUnauthenticated)
//	stored response unreadable                        500
//	response too large to keep, transactional mode    500     rolled back (lease mode: sent, not kept)
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
// By default every response except 5xx and 429 is kept and replayed for
// WithRetention (24h). A response that is not kept releases the key so the
// retry runs the handler for real; so do a panic (the key is released, then
// the panic continues) and a client that disconnects before a success (a
// 2xx or 3xx already produced is kept: its effect happened, and the retry must
// replay it rather than run it twice). Set-Cookie, hop-by-hop headers, Date
// and per-request ids (DefaultNotReplayed) are never stored; WithReplayHeaders
// and WithoutReplayHeaders tune the rest. A response body over
// WithMaxResponse (1 MiB) is sent but not kept, and logged.
//
// # Two modes
//
// Transactional mode, when the store implements store.Transactor (the SQL
// stores): claim, handler and the stored response run in ONE database
// transaction, and the handler gets that transaction from its request
// context (sqlite.TxFrom(r.Context()), postgres.TxFrom(r.Context())) for its
// own writes. The response is buffered and sent only after the commit, so a
// client never sees a success for a rolled-back transaction. A response that
// is not kept, a panic, or a failed commit rolls everything back. A
// concurrent duplicate waits on the key's row, then replays. The lease is
// not renewed while the handler runs (the transaction keeps everyone else
// out of the key, and a driver's transaction is not safe for concurrent
// use); when the handler ran past half the lease it is renewed once, in the
// transaction, just before Complete.
//
// Lease mode, for every other store and for effects outside the database
// (WithLeaseMode): claim the key with a lease, run the handler (its output
// streams to the client and is captured as it goes), then store the response
// or release the key. While the handler runs past half its lease the
// middleware renews it (a re-entrant Claim) every half lease, so long work is
// not taken over and run twice. If a renewal fails the middleware retries
// every eighth of a lease; if the key turns out to be held by another claim,
// or the lease lapses before a renewal succeeds, the handler's request
// context is cancelled with store.ErrLeaseLost as its cause
// (context.Cause), a LeaseLost event is reported, and the response is not
// kept. A handler that ignores its context may then run alongside the
// request that took the key over: give long handlers a lease with margin and
// forward the key to external providers.
//
// # Observability
//
// WithHook receives an Event for every replay, conflict (409), mismatch
// (422), stored response, released key, store error, renewal and lost lease;
// WithLogger sets the log/slog logger for failures.
package httpidem
