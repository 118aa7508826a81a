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
//     them): its nonce is the HMAC-SHA256, under a key derived from the
//     provider's, of the store key and the fingerprint, and the ciphertext
//     is AES-256-GCM under a third derived key. Without the key, the stored
//     form can be compared only within one store key and cannot be guessed
//     offline from a small space of request bodies; Get and a Mismatch still
//     return the fingerprint itself. It is stored as "s1.<key id>.<base64>",
//     so fingerprints are limited to MaxFingerprintLen (512) bytes.
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
// See the package's benchmarks (bench_test.go) and Figures below.
package seal
