// Package seal encrypts what an idemkit store keeps — the stored responses
// and the request fingerprints — so that someone who can read the Redis or
// the table learns neither, in front of any store.Store.
//
//	keys, err := seal.LoadKeyFile("/etc/app/seal.keys")
//	s, err := seal.New(redisStore, keys, seal.WithScope(tenantOf))
//
// # What is sealed, and how
//
// Each scope (a tenant; WithScope says which scope a store key belongs to,
// default one scope for every key) has keys from a KeyProvider: one current
// key and older ones by id. From a key's secret and the scope, HKDF-SHA256
// derives the scope's data keys, so two scopes never share one.
//
//   - A response is sealed by Complete with AES-256-GCM under the current
//     key, with a random nonce and the store key as associated data: it opens
//     only for the key it was stored under, so a response copied to another
//     record is rejected. The key id is stored in front of the ciphertext.
//   - A fingerprint is sealed deterministically (the store must still compare
//     them), as SIV: the IV is the HMAC-SHA256, under a key derived from the
//     provider's, of the store key and the fingerprint, cut to 16 bytes,
//     and the ciphertext is the fingerprint in AES-256-CTR from that IV
//     under a third derived key; opening recomputes the IV, which
//     authenticates what it decrypted. Without the key, the stored form can
//     be compared only within one store key and cannot be guessed offline
//     from a small space of request bodies; Get and a Mismatch still return
//     the fingerprint itself. It is stored as "s2.<key id>.<base64>", with
//     a fingerprint of the form "scheme:hex" (keyer's "v1:" and 64 hex
//     digits) packed to its bytes first, so that a keyer fingerprint is 77
//     characters sealed against 67 in clear: every claim sends it, and over
//     Redis a longer one costs each round trip. Fingerprints are limited to
//     MaxFingerprintLen (512) bytes.
//   - Keys, tokens, statuses and times are not sealed: the store needs them.
//     Hash keys before they reach the store if they are sensitive.
//
// # Rotation and shredding
//
// Add a key to a scope to rotate: new records are sealed under it and older
// records, whose key id is stored beside them, still open, replay, and
// mismatch as before (a Claim whose fingerprint was sealed under an older
// key is recognised and sent again in the form the store holds, so the
// store alone still decides the outcome).
//
// Delete a key to shred what it sealed: a replay of such a record answers
// Completed with the engine's "kept without response" marker (package idem
// reports Result.NotKept, httpidem answers 410), never garbage and never an
// error that would make the engine run the work again; Get returns the same
// marker and the fingerprint in its sealed form. A scope with no current key
// cannot claim or complete at all: those calls fail with ErrKeyNotFound.
//
// A response or fingerprint changed in the store, moved to another key, or
// read under another secret with the same id fails with ErrCorrupt. Errors
// never quote keys, fingerprints, responses or secrets, and the package logs
// nothing.
//
// # Optional interfaces
//
// New returns a Store whose dynamic type implements store.Transactor and
// store.Purger exactly when the wrapped store does; inside InTx the Store
// given to fn seals as this one does. Migrate and Close call the wrapped
// store's. Seal composes with package cache: cache.New(seal.New(s, keys))
// keeps opened records in memory.
//
// # Cost
//
// What sealing costs the caller's CPU, one goroutine over the memory store
// (BenchmarkCost; the difference between sealed and plain is the seal's own
// work):
//
//	go test -run '^$' -bench '^BenchmarkCost$' ./store/seal/
//
//	                 plain                   sealed
//	Replay, 1 KiB    0.7–0.9 µs, 2 allocs    1.9–2.7 µs, 3 allocs
//	Cycle, 1 KiB     2.0–2.6 µs, 4 allocs    4.0–5.1 µs, 6 allocs
//	Replay, 64 KiB   10–14 µs                28–37 µs (AES-GCM at ≈ 3 GB/s)
//
// The seal's share of a 1 KiB replay is about 1 µs: AES-GCM opening the
// response (0.3–0.4 µs), the fingerprint's HMAC (0.25 µs), its CTR, packing
// and base64 (0.2 µs), the key lookup (0.06 µs). BenchmarkCrypto measures
// each step.
//
// Against a server the seal adds that CPU to a round trip of 30–100 µs.
// BenchmarkPaired measures sealed against unsealed at 16 workers on the same
// store in alternating phases, with fingerprints of keyer's form:
//
//	go test -run '^$' -bench '^BenchmarkPaired$' -benchtime 40000x -count 5 ./store/seal/
//
// On the 2-core machine these figures come from (load below 1; Redis and
// PostgreSQL on the same two cores as the benchmark), sealed/unsealed at
// 1 KiB, five rounds: Redis cycle 0.90–0.96 (median 0.92), Redis replay
// 0.85–0.92 (0.86), PostgreSQL cycle 0.94–0.96 (0.95), PostgreSQL replay
// 0.88–1.01 (0.89). The pairing's own noise is a few percent: the Redis
// store paired with itself measured 0.90–0.99 in three rounds, and with a
// stand-in decorator that only burns 1.2 µs of CPU per Claim 0.90–0.98
// (2.4 µs: 0.81–0.84). A Redis replay is the cheapest call there is (one
// SET: about 9 µs of server CPU, 1 µs of it the command and the rest its
// socket, and 15 µs of client CPU per call at 16 workers), so the seal's
// microsecond shows most there; and with client
// and server sharing two cores, a microsecond more of client CPU per call
// costs more than a microsecond of throughput: measured with getrusage and
// the server's INFO cpu, a sealed replay took 3 µs more client CPU and
// 1.3 µs more server CPU per call than an unsealed one, the server's
// share being system calls (fewer calls arrive per wake-up). Over memory
// the seal's work is more than the store's own (sealed/unsealed 0.4): a
// 10 % bound cannot hold there.
//
// A sealed fingerprint was 133 characters before "s2." (GCM with its
// 16-byte tag, unpacked): over Redis that alone cost replays about 4 %.
// A sealed 1 KiB response is 32 bytes longer than the response; the Redis
// store's completion script concatenates values up to 3 KiB, so a sealed
// 1 KiB cycle costs the server no more commands than an unsealed one.
package seal
