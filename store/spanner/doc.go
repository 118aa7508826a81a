// Package spanner keeps idempotency keys in a Cloud Spanner table, on
// cloud.google.com/go/spanner, with Spanner's clock deciding every deadline.
//
// It is a module of its own (github.com/idemkit/idemkit/store/spanner), so
// that users of idemkit's core module never download the Spanner SDK.
// Import it to register the spanner:// scheme with store.Open:
//
//	spanner://projects/P/instances/I/databases/D?table=idempotency_keys&purge_batch=500
//
// The Store opened from a URL owns its client (Close closes it) and connects
// with the default credentials, or to the emulator when
// SPANNER_EMULATOR_HOST is set. New takes a *spanner.Client of your own.
//
// # What Spanner guarantees, and how the Store uses it
//
// Every write is a read-write transaction: Spanner's transactions are
// serializable and externally consistent (if one commits before another
// begins, its commit timestamp is smaller and every later read sees it),
// across regions. Claim, Complete, Release and Renew each run one: a statement
// reads CURRENT_TIMESTAMP() and the key's row together, the Store decides
// from those alone, and the new row is written in the same transaction,
// so Spanner's locks, not the client, decide between concurrent claims. Get
// is a strong read (a single-use read-only transaction), which sees every
// transaction committed before it began.
//
// Renew moves the end of a live lease the token holds and writes nothing
// otherwise (store.ErrLeaseLost): a heartbeat that reaches the table after
// a Release, a Complete or a takeover committed finds the row gone or
// changed. Release deletes only a live lease; a lapsed one stays.
//
// # Attempts and fences
//
// The Attempt and Fence columns hold Record.Attempt and Record.Fence. A
// Claim that acquires the key computes them with store.Successor from the
// row its transaction read (a lapsed lease, an ended retention, the
// caller's own live lease, or none) at that transaction's
// CURRENT_TIMESTAMP(), so the fence of a new key is the server's time in
// microseconds; Complete and Renew keep them. A lapsed lease stays in the
// table store.LapsedKept (the row deletion policy is a day past ExpiresAt,
// and Purge keeps it as long), absent to Claim and Get, so that the claim
// that takes it over counts attempt 2. Rows written before the columns
// existed read as Attempt 0, Fence 0. Migrate adds the columns to a table
// made by an earlier version, and replaces its row deletion policy (see
// Upgrades); run it before this version writes to the table.
//
// # Time
//
// The client's clock is never read. Every deadline is CURRENT_TIMESTAMP()
// — Spanner's TrueTime at the moment the deciding transaction read the row
// — plus the lease or retention, stored as a TIMESTAMP (LockedUntil,
// ExpiresAt); every expiry decision compares a stored deadline with the
// CURRENT_TIMESTAMP() of the transaction deciding. Because the read comes
// before the commit, a lease counts from a moment slightly before its
// commit timestamp: a holder's lease is shorter than asked by at most its
// own commit's latency, never longer.
//
// # Aborts
//
// Spanner aborts a read-write transaction that conflicts with another
// (wound-wait locking). The client retries an aborted transaction with
// backoff until it commits or ctx ends, and the Store adds the failures
// that mean a transaction was dropped (see retryTx in the source): an abort
// is never reported as a lost lease, nor as an error while ctx lasts.
//
// # Transactions (store.Transactor)
//
// InTx runs fn in one read-write transaction: its Claim, its own writes
// through TxFrom(ctx) and its Complete commit together. fn may run more
// than once, as with spanner.Client.ReadWriteTransaction: an aborted
// attempt is discarded whole and fn called again, so its effects must go
// through the transaction. See InTx.
//
// # Limits
//
// A response is at most MaxResponse (10 MiB), Spanner's limit for one
// BYTES value; Complete refuses a larger one with store.ErrInvalid before
// writing (the idem engine then keeps the key completed without a body).
// A commit carries at most 100 MB and 80,000 mutations: a Store's own
// commit is one row, so only the caller's own writes in InTx can come near
// that, and Spanner then refuses the commit (nothing of it stays). Keys
// and fingerprints of up to store.MaxKeyLen and store.MaxFingerprintLen
// bytes fit Spanner's 8 KiB limit for a key.
//
// # Expiry
//
// Schema's table has a row deletion policy a day past ExpiresAt, so Spanner
// deletes expired rows by itself; Purge deletes them at once (a lapsed
// lease once it is store.LapsedKept old), for tables without the policy.
//
// # What the emulator cannot show
//
// The tests run against the Cloud Spanner emulator, which shows the
// semantics but not: latency (a commit there takes microseconds, against
// milliseconds in a region and more across regions), aborts under
// contention (it runs one read-write transaction per database at a time,
// so the Store queues its transactions when SPANNER_EMULATOR_HOST is set
// and the wound-wait aborts that Spanner's locks cause under contention do
// not happen there: the tests inject aborts instead), TrueTime's
// uncertainty and commit wait,
// multi-region placement, and the background work of the row deletion
// policy.
package spanner
