// Package httpidemtest proves that an HTTP endpoint keeps the promises of
// an Idempotency-Key: it is the HTTP twin of storetest. Where storetest
// checks a store, httpidemtest checks what clients actually depend on, the
// endpoint, whatever middleware, framework or proxy sits in front of it.
//
//	func TestIdempotency(t *testing.T) {
//		var ctl httpidemtest.Control // Enter(ctx) in the handler, before its effect
//		httpidemtest.Run(t, httpidemtest.Target{
//			Handler:   router,       // or URL: "http://127.0.0.1:3000"
//			Path:      "/payments",
//			Body:      func() []byte { return []byte(`{"amount":1990}`) },
//			OtherBody: func() []byte { return []byte(`{"amount":5}`) },
//			Count:     countPayments, // or CountPath: "/payments", a GET listing them
//			Hold:      ctl.Hold,
//			Fail:      ctl.Fail,
//			MaxBody:   1 << 20,
//			Scopes:    []http.Header{{"Authorization": {"Bearer alice"}}, {"Authorization": {"Bearer bob"}}},
//		})
//	}
//
// Run runs every rule in a subtest named for it; Check runs them outside a
// test and returns a Result per rule (cmd/idemcheck is Check on a URL).
// Each failure names the rule, says what broke, and shows the exchanges:
// request, key, scope, status, the headers that matter and the body,
// truncated. A rule the Target does not describe enough for is skipped with
// the field it needs.
//
// # The rules, and what each means for a client
//
//	keys/missing              no Idempotency-Key: 400, nothing happens. A client that forgot the key learns it at once.
//	keys/malformed            an empty key, an unterminated quote, a list, two fields: 400, nothing happens.
//	keys/too-long             a key over MaxKeyLen (255): 400; a key at the limit works.
//	replay/identical          a retry gets the first status, headers and body; the effect ran once.
//	replay/marker             the replay says so (Idempotent-Replayed: true); the first answer does not.
//	mismatch/422              the key reused with another body: 422, nothing happens.
//	mismatch/not-poisoned     after that 422, the key still replays its first answer.
//	errors/problem-json       the middleware's errors are application/problem+json (RFC 9457).
//	inflight/conflict-or-wait a duplicate while the first runs: 409, or a wait and the first answer; one effect.
//	inflight/retry-after      that 409 says Retry-After, at most MaxRetryAfter (2 s): retry soon, not after a lease.
//	notkept/5xx, notkept/429  a 500 or 429 is not kept: the retry runs the effect for real.
//	concurrency/burst         Concurrency identical requests at once: one effect; every answer but 409s the same.
//	faults/lost-reply         the answer is lost on its way back (a proxy in the suite drops it after the
//	                          server sent it): the retry replays it; one effect.
//	faults/restart            the server restarts between a request and its retry: the retry replays; one effect.
//	limits/body-at-limit      a body of exactly MaxBody bytes is served, kept and replayed.
//	limits/body-over-limit    one byte more: 413, nothing happens.
//	scope/separate            the same key from two callers: two effects, each caller replays its own answer.
//
// A retry behaves as a client that honours a 409: while it gets one (the
// first request's answer may leave before its key is settled), it waits the
// Retry-After, at most MaxRetryAfter, and sends again, up to five times.
//
// The suite counts effects before and after each rule, so nothing else may
// take effect on the endpoint while it runs, and it sends every request with
// a fresh random key. It talks only to the target: CountPath must be on the
// target's host, and the lost-reply proxy listens on 127.0.0.1 and forwards
// only there.
//
// Without Hold, the in-flight rules send the duplicate InFlightAfter (100
// ms) after the first request and are skipped when the endpoint answered
// sooner. The not-kept rules need Fail and the restart rule needs Restart;
// Control gives an in-process handler the first two.
//
// The package imports the standard library and keyer only: a framework or a
// third-party middleware can run it from its own tests without taking on
// idemkit's stores.
package httpidemtest
