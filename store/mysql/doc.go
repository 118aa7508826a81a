// Package mysql keeps idempotency keys in a MySQL or MariaDB table, using
// database/sql with the driver github.com/go-sql-driver/mysql (imported by
// this package, so sql.Open("mysql", dsn) works) and the database server's
// clock.
//
// A Store works in two modes. In lease mode (the plain store.Store methods)
// each call is one or two short autocommit statements, for work whose effect
// is outside the database: the key is claimed with a lease, the work runs,
// and the response is stored. In transactional mode (InTx, the
// store.Transactor interface) the claim, the caller's own writes and the
// stored response commit or roll back together in one InnoDB transaction;
// TxFrom gives the caller that *sql.Tx.
//
//	db, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/app")
//	if err != nil {
//		return err
//	}
//	s, err := mysql.New(db)
//	if err != nil {
//		return err
//	}
//	defer s.Close() // its prepared statements; db stays open
//	if err := s.Migrate(ctx); err != nil {
//		return err
//	}
//
// # Schema
//
// Every record is one InnoDB row of a single table (DefaultTable unless
// WithTable says otherwise) whose primary key is the idempotency key, with an
// index on expires_at for Purge. Keys, fingerprints and tokens are VARBINARY:
// compared byte for byte, never case-folded or padded with spaces, and long
// enough for every value store.CheckClaim accepts, so no value is ever
// truncated. Responses are LONGBLOB (bounded by the server's
// max_allowed_packet). Schema and (*Store).Schema return the DDL for
// migration tools; Migrate runs it.
//
// The attempt (INT UNSIGNED) and fence (BIGINT UNSIGNED) columns hold
// store.Record.Attempt and Fence. A table created before they existed is
// upgraded in place by Migrate, which adds them with one ALTER TABLE ...
// ADD COLUMN ... DEFAULT 0 (no table copy on MySQL 8 or MariaDB 10.3 and
// later; safe when several processes migrate at once). The rows already
// there report Attempt 0 and Fence 0 until a claim acquires their key
// again: a takeover of such a lapsed lease counts attempt 2, with a fence
// from the server's clock.
//
// # Statements
//
// All times come from the server's UTC_TIMESTAMP(6): microseconds, the same
// for every application server, and independent of the session's time_zone.
// Times are exchanged as integer microseconds, so the DSN's parseTime and loc
// do not matter either. Each statement is prepared once per connection.
//
// The claim of a new key is one round trip: a plain INSERT, whose primary key
// alone decides who acquires. The lease's end it wrote comes back in the
// same reply, through LAST_INSERT_ID(expr) (this sets the session's
// LAST_INSERT_ID; an AUTO_INCREMENT insert of yours after it sets it again).
// When the key has a row, the INSERT fails with a duplicate-key error that
// writes nothing, and a SELECT reads the row: a replay, an InProgress and a
// Mismatch take two round trips and modify no row. Taking over a lapsed lease
// and renewing one's own lease are UPDATEs that name the token they expect.
// Complete is one token-checked UPDATE of the record in progress (a SELECT
// follows only when it changed no row, to tell a retried Complete, which
// keeps the first response, from a lost lease, whatever the DSN's
// clientFoundRows says); Release is one DELETE of the caller's live lease.
//
// Every claim that acquires a key sets its attempt and fence in the same
// statement, on the server's clock, as store.Successor says: the INSERT of
// a new key writes attempt 1 and the server's now in microseconds; the
// takeover UPDATE, which names the token, status, attempt and fence of the
// row it read, counts one attempt more over a lapsed lease (1 over an
// expired completed record) and a fence past the old one; a re-entrant
// claim keeps both. The Store works out what it wrote from the row it read
// and the lease's end the statement reports, so this costs no round trip.
//
// Renew is one UPDATE of the caller's live lease (WHERE key, token, in
// progress and expires_at after the server's now), which never creates or
// revives a row: a renewal that arrives after a Release finds no row and
// returns store.ErrLeaseLost. When it changes no row, a SELECT tells that
// from a renewal to the very microsecond the lease already ends at, which
// the server reports as no row changed unless the DSN sets clientFoundRows.
//
// A lapsed lease stays in the table for store.LapsedKept after its end, so
// that the claim that takes it over counts the attempt; Purge deletes it
// after that, and a completed record as soon as its retention is over.
//
// # Concurrency and deadlocks
//
// Claims are correct at REPEATABLE READ (the server's default) and READ
// COMMITTED. A duplicate of a key whose row another transaction has written
// waits for that transaction's row lock; inside a transaction the row is then
// read with a locking read (LOCK IN SHARE MODE), which sees the latest
// committed version even at REPEATABLE READ. When several sessions wait for
// one key and its holder rolls back or deletes it, InnoDB may break their
// race with a deadlock error (1213): an autocommit statement is simply run
// again, and a transaction, which the server has rolled back whole, is run
// again from the start by InTx (see InTx). Lock wait timeouts (1205) are
// returned as errors; in a transaction the Store then refuses further calls
// and InTx does not commit, since with innodb_rollback_on_timeout the server
// has rolled the whole transaction back.
//
// Cancelling the context of a statement that waits for a row lock returns at
// once, but go-sql-driver/mysql only closes the connection: the server may
// still run the abandoned statement when the lock is released. An abandoned
// Claim may thus acquire the key for a token nobody holds, which then blocks
// the key until its lease lapses, as after a crash.
//
// # Servers
//
// Tested with MariaDB 10.11. The SQL is meant to be accepted by MySQL 8.0 as
// well: no RETURNING (MariaDB has it, MySQL does not), no CREATE INDEX IF NOT
// EXISTS (MySQL lacks it; the index is declared in CREATE TABLE), LOCK IN
// SHARE MODE rather than MySQL 8's FOR SHARE, DELETE … ORDER BY … LIMIT
// for Purge. MySQL 8 was not available to test on.
package mysql
