// Package postgres keeps idempotency keys in a PostgreSQL table, using the
// github.com/jackc/pgx/v5 driver and the database server's clock.
//
// A Store works in two modes. In lease mode (the plain store.Store methods)
// each call is one short autocommit statement, for work whose effect is
// outside the database: the key is claimed with a lease, the work runs, and
// the response is stored. In transactional mode (InTx, the store.Transactor
// interface) the claim, the caller's own writes and the stored response
// commit or roll back together in one database transaction, so a crash or an
// error can never leave a key without its effect or an effect without its
// key; TxFrom gives the caller that transaction.
//
// # Schema
//
// Every record is one row of a single table (DefaultTable unless WithTable
// and WithSchema say otherwise), keyed by the idempotency key, with an index
// on expires_at for Purge. Schema and (*Store).Schema return the DDL for
// migration tools; Migrate runs it for those without one.
//
// # Statements
//
// All times come from the server's clock_timestamp(), so application servers
// with skewed clocks agree; durations are sent as intervals of whole
// microseconds (rounded up). Claim starts with the statement its recent
// claims call for. While most inserted new keys it starts with
//
//	INSERT ... ON CONFLICT (key) DO NOTHING RETURNING expires_at
//
// so a new key is one round trip and exactly the server work of that plain
// statement; a key that exists (committed before, or by a concurrent claim
// the INSERT waited for) returns no row and is read by a second statement,
// which sees it. While most met existing rows (a wave of retries) it starts
// with a plain SELECT of the row, so a replay is one round trip and exactly
// a SELECT's work, and an absent key goes on to the INSERT. A replay writes
// nothing either way: no new row version, no row lock, no transaction id,
// no WAL, no commit flush. Taking over a
// lapsed lease and renewing one's own lease are conditional UPDATEs that name
// the token they expect, so the unique index and row locks alone decide who
// holds a key, never a read followed by a write. Complete, Release and Renew
// are one token-checked statement each; Renew's UPDATE matches only a live
// lease of its token, so it never creates or revives a row.
//
// The statement that acquires a key (the INSERT of a new key, or the
// takeover's UPDATE) also sets the row's attempt and fence columns from the
// row it replaces, with CASE and greatest() over the old values and the
// server's clock read once for the statement, as store.Successor says: a
// new key is attempt 1 and fence the clock in microseconds, a lapsed lease
// taken over counts one attempt more with greatest(old fence + 1, clock),
// and an expired completion starts again at attempt 1 with a larger fence.
// A re-entrant claim, Renew and Complete keep both. A lapsed lease stays in
// the table for store.LapsedKept (Release and Purge leave it) so that its
// takeover is counted; rows written before these columns existed read as
// attempt 0 and fence 0 (the columns' defaults), as on every backend. pgx's statement cache prepares each
// statement once per connection. A response of 1 MiB or more is handed to
// the wire protocol as it is (pgconn, an unnamed statement, around pgx's
// query tracer), so storing it copies it once, into the message.
//
// # Coalescing
//
// With WithCoalescing (off by default), concurrent claims' INSERTs and
// Completes' UPDATEs are sent together: while a statement of the kind is in
// flight, further callers queue, and the queue goes to the server as one
// multi-row statement over unnest() of arrays, in key order so two batches
// never deadlock. A batch decides only the cases its single-key statement
// would (a new key inserted, a live lease completed); every other caller,
// and a second call of one key in the batch, goes on through the single-key
// statements above. A caller alone runs those statements as it would
// without coalescing. Calls in a transaction of InTx are never batched.
package postgres
