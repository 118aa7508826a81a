// Package idemclient is the client half of idempotency keys: an
// http.RoundTripper that sends one Idempotency-Key per logical call and
// keeps it on every retry, so a server using httpidem (or any server that
// follows the IETF draft "The Idempotency-Key HTTP Header Field") runs the
// operation once however many times the network makes the client try.
//
//	client, err := idemclient.NewClient() // an error only for an invalid option
//	resp, err := client.Post("http://127.0.0.1:3000/payments", "application/json", strings.NewReader(`{"amount":1990}`))
//	if err == nil && idemclient.Replayed(resp) { /* the first attempt's answer */ }
//
// # What it sends
//
// A request whose method is keyed (POST and PATCH by default, WithMethods)
// gets a fresh random key, unless its context carries one (WithKey) or the
// request already has an Idempotency-Key header, which is kept as is. Every
// retry of that call sends the same key; a new call gets a new key. A key
// given with WithKey is bound to the first request sent with it: sending a
// different request (another method, URL or body) under the same context
// fails with ErrKeyReused before anything is sent, since the server would
// answer it 422 or, worse, replay the other request's response.
//
// Keys follow keyer's one key rule (keyer.CheckKey), the rule httpidem
// applies: 1 to MaxKeyLen visible ASCII characters, no space anywhere, not
// "null". A key that breaks it, given with WithKey or made by WithKeyFunc,
// fails with ErrInvalidKey before anything is sent. Methods are compared as
// httpidem compares them: WithMethods("post") means POST.
//
// # When it retries
//
//	answer                                   retried?
//	connection error, reply lost             yes, same key (the server replays if the first ran)
//	409 with Retry-After (key in flight)     yes, after Retry-After
//	429, 503 with Retry-After                yes, after Retry-After
//	429, 502, 503, 504 without Retry-After   yes, after a backoff with jitter
//	anything else (2xx, 4xx, 500, 422, ...)  no: returned to the caller
//
// Only requests that can be sent again are retried: no body, or a body the
// transport can rewind (Request.GetBody, which http.NewRequest sets for
// bytes and strings readers). A request without a key is retried only when
// its method is idempotent by definition (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE): a POST without a key is sent once, whatever happens. Attempts are
// bounded (WithMaxAttempts, default 4), a Retry-After longer than
// WithMaxRetryAfter (default 30s) is not waited for (the answer is
// returned), and the request's context bounds the whole call, waits
// included.
//
// Replayed reports whether a response is a replay of the first attempt's
// answer (Idempotent-Replayed: true); KeyOf returns the key a response was
// obtained with.
package idemclient
