// Package keyer turns an HTTP request into the two strings an idempotency
// store needs: the key (from the Idempotency-Key header, scoped to the caller)
// and a fingerprint of the request the key was sent with.
//
// # Keys
//
// Parse reads the Idempotency-Key header as the IETF draft
// (draft-ietf-httpapi-idempotency-key-header) defines it, a Structured Field
// string such as
//
//	Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//
// and also accepts the bare token form that many clients (Stripe's among
// them) send:
//
//	Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324
//
// A key is 1 to 255 visible ASCII characters (0x21-0x7E). A missing header,
// more than one header, and a malformed value are reported as a *KeyError
// whose Reason says what is wrong; errors.Is matches ErrNoKey, ErrManyKeys or
// ErrMalformedKey.
//
// # Scoped keys
//
// Two clients may pick the same key. ScopedKey composes the caller's scope
// (tenant, user, route: whatever identifies who is asking) and the client's
// key into one store key. Every part is length-prefixed, so no two different
// (scope, key) lists ever produce the same store key.
//
// # Fingerprints
//
// A Fingerprinter hashes the method, the path and query, chosen headers and
// the body with SHA-256 into "v1:" followed by 64 hex digits. The version
// prefix changes whenever the algorithm does, so a caller that finds a stored
// fingerprint of another version knows it cannot compare the two (httpidem
// then trusts the key rather than answering 422). For JSON bodies it
// can canonicalise first, so that key order and whitespace do not change the
// fingerprint while every number and string value does, and it can leave
// named top-level fields out (a client timestamp, a nonce).
//
// # Keys in logs and telemetry
//
// A store key holds what a client chose and the scope the server added (a
// tenant, a user), so it does not belong in logs as it is. A Redactor writes
// it as an HMAC-SHA256 (HashKeys with a secret every process shares, or
// DefaultRedactor with a per-process random one), omits it (OmitKeys), or,
// when the user opts in, writes it raw (RawKeys). RedactHandler applies a
// Redactor to the "key" attributes of any slog logger.
//
// keyer imports the standard library only.
package keyer
