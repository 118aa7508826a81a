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
// microseconds (rounded up). The claim of a new key is one round trip:
//
//	WITH ins AS (INSERT ... ON CONFLICT (key) DO NOTHING RETURNING ...)
//	SELECT ... FROM ins UNION ALL SELECT ... FROM t WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)
//
// The same statement returns an existing record when its row was committed
// before the statement began, so a replay is also one round trip, and it
// writes nothing: no new row version, no row lock, no transaction id, no WAL,
// no commit flush. When the row was committed after the statement's snapshot
// was taken (a concurrent claim), the statement returns no row; the store
// then reads the row with a second statement, which sees it. Taking over a
// lapsed lease and renewing one's own lease are conditional UPDATEs that name
// the token they expect, so the unique index and row locks alone decide who
// holds a key, never a read followed by a write. Complete and Release are one
// token-checked statement each. pgx's statement cache prepares each
// statement once per connection.
package postgres
