// Package redis keeps idempotency keys in Redis, so every instance of a
// service sees the same claims and stored responses.
//
// It works with any go-redis/v9 redis.UniversalClient: a single node, a
// Sentinel-managed failover client, a Redis Cluster or a Ring. Each record is
// one Redis string under one key (prefix + key), and every operation touches
// only that key (a large Complete also a staging key in the same hash slot),
// so every operation runs on one node and in one slot.
// Every command it sends is safe for go-redis to retry after a lost reply.
//
//	s, err := redis.New(client, redis.WithPrefix("payments:idem:"))
//	c, err := s.Claim(ctx, key, fingerprint, store.NewToken(), 30*time.Second)
//
// # How each call maps to Redis
//
//   - Claim of a new key is one command, SET key value NX GET PX
//     lease+store.LapsedKept: it writes the record (Attempt 1, Fence the
//     Store's clock in microseconds) when the key is absent and otherwise
//     returns the record that is there. A completed one decides the outcome
//     at once (Completed, Mismatch). A record in progress may hold a live
//     lease or a lapsed one that is kept for its attempt count, which only
//     the server's clock can tell: a Lua script then decides and writes in
//     one atomic step, renewing the caller's own lease (a re-entrant
//     Claim), taking over a lapsed one (Attempt+1, Fence above the lapsed
//     one's and at least the server's TIME in microseconds), or reporting
//     the live record (InProgress, Mismatch). Servers without SET ... NX GET
//     (before Redis 7.0) get a Lua script in place of the SET, chosen
//     automatically after the first syntax error.
//   - Renew is one Lua script that extends the lease only when the key
//     holds the token's record in progress with a live lease, and
//     otherwise writes nothing and reports store.ErrLeaseLost.
//   - Complete and Release are Lua scripts (EVALSHA, reloaded on NOSCRIPT)
//     that compare the token and check that the lease is live before
//     writing, so a holder whose lease lapsed can never overwrite or delete
//     the next holder's record, nor its own lapsed one. A response of
//     64 KiB or more is kept out of Lua (a script copies every argument into
//     a Lua string, 1.4 ms of server time per MiB): in one pipeline Complete
//     SETs the completed record under a staging key in the record's hash slot
//     (prefix{prefix+key}:stage:…, or prefix+key:stage:… when the key has a
//     hash tag; it expires after 10 s if nothing consumes it) and runs a
//     script that checks the record, compares the staged header with the one
//     it would write, and RENAMEs the staging key over the record, or deletes
//     it. The fingerprint in that header is the one of the Store's own recent
//     Claim; when the Store does not know it, or knew it wrong, or the key's
//     braces leave no staging key in its slot, Complete WATCHes and GETs the
//     key, checks the token itself and SETs the completed record in
//     MULTI/EXEC, which Redis aborts if the key changed in between. An ACL
//     for the Store's user must allow the staging keys (they start with the
//     prefix) and RENAME.
//   - Get is GET and PTTL in one MULTI/EXEC (one round trip).
//   - With WithCoalescing(true), the claims' SET ... NX GET and the small
//     completions' scripts that callers make at the same time share one
//     pipeline; each is still checked and answered on its own.
//
// # Time
//
// Expiry is Redis's own, on the server's clock: a completed record lives for
// its retention (PX), and a record in progress for its lease plus
// store.LapsedKept (PX), so that a lapsed lease is still counted by the
// claim that takes it over. Its lease is live while its PTTL exceeds
// LapsedKept; after that the key is absent to Claim and Get, as a lapsed
// lease always was, and an Inspector lists the record as lapsed until Redis
// deletes it. That, on the server's clock, alone decides whether a key is
// absent and may be claimed again (in the lease's last millisecond, which
// PTTL cannot split, the deadline stored in the value is compared with the
// server's TIME). The times in a
// Record (LockedUntil, ExpiresAt) are computed by the process that wrote the
// record, from its clock (WithClock, default time.Now) plus the duration, and
// stored in the value; they are informational (a Retry-After hint) and are as
// accurate as the clocks of the service's machines agree. Durations are
// rounded up to whole milliseconds.
//
// # Eviction
//
// Every record carries a TTL, so any maxmemory-policy other than noeviction
// (allkeys-* and also volatile-*, which evict precisely keys with a TTL) lets
// Redis drop a record in progress or a completed one under memory pressure:
// the next retry would then run the work a second time. On first use the
// Store reads maxmemory-policy (every master of a Cluster) and logs a warning
// with log/slog unless it is noeviction; CheckEviction does the same on
// demand.
//
// # Persistence
//
// A Redis that keeps nothing across a restart (appendonly no and no RDB save
// points) comes back empty after a crash, and so does a Cluster master
// restarted before its replica took over; its replica then resynchronises
// to empty. Every claim and stored response is gone and each retry runs its
// work again. On first use the Store reads appendonly and save (every master
// of a Cluster) and logs a warning when a node keeps nothing;
// CheckPersistence does the same on demand, and WithPersistenceCheck(false)
// turns the warning off.
//
// # Replication
//
// Redis replicates asynchronously. If a master fails after acknowledging a
// Claim or a Complete and before a replica received it, the promoted replica
// has never seen that write: a retry can then claim the key again and the
// work runs twice. WithReplicas(n, timeout) closes that window: every write
// of a Claim or Complete is followed, on the same connection, by WAIT n
// timeout, and a write fewer than n replicas acknowledged fails with
// ErrNotReplicated instead of counting. An acknowledged write then survives
// a failover of its master unless all n replicas are lost too. It does not
// make Redis strongly consistent; where a failover must never repeat work,
// keep the keys in PostgreSQL.
//
// # Cancellation
//
// Every call checks its context first. For a call already waiting on Redis
// to end with its context, create the client with ContextTimeoutEnabled;
// otherwise go-redis waits up to its ReadTimeout. Either way the error of a
// call whose context ended matches the context's error.
//
// # Stored value
//
// Each value is a compact binary record, version 2: a 25-byte header
// (version, status, token length, fingerprint length, time in Unix
// milliseconds, Attempt, Fence), then the token, the fingerprint and, once
// completed, the response bytes. Values of version 1, written by earlier
// releases without Attempt and Fence, are still read and written in place
// (they report Attempt 0 and Fence 0; a renewal or re-entrant claim
// rewrites one as version 2). A value that does not decode is reported as
// an error, never as a missing key.
package redis
