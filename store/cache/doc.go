// Package cache keeps completed idempotency records in process memory, in
// front of any store.Store, so that replays are answered without a round
// trip to the store.
//
//	s, err := cache.New(redisStore) // or cache.New(seal.New(...)), cache.New(postgresStore), ...
//
// # Why it is exact
//
// In idemkit a completed record never changes: a retried Complete keeps the
// first response, Release never touches a completed record, and the record
// lasts until its ExpiresAt. So a completed record the store returned can be
// served from memory until then, and the answer is the one the store would
// give. The cache holds nothing else:
//
//   - A Claim of a key cached as completed with the same fingerprint answers
//     Completed from memory. Every other Claim goes to the store: a key not
//     cached, a fingerprint that differs (the store says Mismatch, as
//     always), a key in progress (never cached).
//   - A Completed answer from the store, to a Claim or a Get, fills the
//     cache. Complete caches nothing, not even after the store confirms it:
//     a retried Complete keeps the first response, which its caller may not
//     know, so only records the store returns are cached.
//   - An entry is served only while its record's ExpiresAt is more than the
//     margin (WithMargin, default 1s, for the skew between this process's
//     clock and the store server's) after now, by the cache's clock
//     (WithClock); never later.
//   - Inside a store.Transactor's InTx the cache is not used at all: what a
//     transaction sees may roll back.
//
// # The one thing it changes
//
// A record deleted behind the cache's back — a manual DELETE, a Purge or
// a flush run by another process, a Redis eviction — is still replayed
// from memory by this process until the entry's retention ends. Call
// Invalidate (or InvalidateAll) after such a delete. Records deleted by
// their expiry are never served: their ExpiresAt has passed.
//
// # Bounds and counters
//
// The cache is split into up to 64 shards, each with its own lock and its
// share of the bounds (WithMaxEntries, WithMaxBytes); when a shard is full
// its least recently used record leaves. Stats reports hits, misses, fills,
// evictions, expirations and the entries and bytes held.
//
// # Optional interfaces
//
// New returns a Store whose dynamic type implements store.Transactor and
// store.Purger exactly when the wrapped store does, so code that looks for
// them with a type assertion (httpidem's transactional mode, the purge job)
// sees the truth. Migrate and Close call the wrapped store's. Unwrap returns
// the wrapped store.
//
// # Figures
//
// Replays of 1024 completed keys (a 66-byte response) through the cache
// against the same replays straight to the store, in alternating phases
// on the same machine (BenchmarkPaired; 2 shared cores, Redis 7 and
// PostgreSQL 15 on loopback, load average 9 to 17 from other work, so
// absolute figures are noisy):
//
//	go test -run '^$' -bench '^BenchmarkPaired$' -benchtime 20000x -count 2 ./store/cache/
//
//	                      cached        uncached      cached/uncached
//	Redis, 16 workers     0.3–2.2M/s    11–40k/s      26×, 53×, 55× (three runs)
//	PostgreSQL, 16        0.9–1.1M/s    12–22k/s      82×, 51×, 47×
//	Redis, 1 worker       0.6–1.1M/s    8–27k/s       69×, 31×, 65×
//	PostgreSQL, 1         1.0–1.1M/s    11–19k/s      102×, 60×, 86×
//
// A hit costs a shard lock, a map lookup and a copy of the response.
package cache
