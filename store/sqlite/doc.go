// Package sqlite keeps idempotency keys in a SQLite database file, so a
// service gets idemkit without running any database server.
//
// It works on database/sql. Open opens a file (or ":memory:" for tests) with
// the driver modernc.org/sqlite, which is pure Go, and sets it up: WAL
// journal, synchronous=NORMAL, a busy timeout, BEGIN IMMEDIATE for write
// transactions. New wraps a *sql.DB the caller already has (any driver
// registered for SQLite). Migrate creates the table; Schema returns the same
// SQL for those who run their own migrations.
//
//	s, err := sqlite.Open("idemkit.db")
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	if err := s.Migrate(ctx); err != nil {
//		return err
//	}
//
// # How it stores a key
//
// One row per key in one table (default "idempotency_keys", see WithTable), keyed
// by the key. Times are INTEGER unix microseconds read from the process
// clock (injectable with WithClock), so comparisons are exact. The decision
// to acquire is one INSERT … ON CONFLICT (key) DO UPDATE … WHERE <claimable>
// statement: the unique key decides who acquires, never a read followed by a
// write. A live record that statement would not change (a replay, a
// mismatch, another token's claim) is reported from a SELECT. Claim runs the
// two in the order its recent claims favour: while claims mostly acquire, it
// writes first (a new key costs one statement) and reads only when the write
// changed nothing; while they mostly find records, it reads first (a replay
// costs one SELECT and no write). It writes first only when no other write of
// the Store holds its write gate at that instant, so a claim that changes
// nothing never waits for the Store's writers. Complete is an UPDATE guarded
// by key and token, Release a DELETE guarded the same way (and by the
// lease being live), and Renew an UPDATE of the lease guarded by key, token
// and a live lease, so a heartbeat never brings back a released or lapsed
// key.
//
// The claim statement also sets the record's attempt and fence columns
// (store.Record.Attempt and Fence), as store.Successor says, from the row it
// replaces, in the same statement (CASE expressions on the old row), and
// returns them (RETURNING): a takeover of a lapsed lease counts one attempt
// more and gets a larger fence, with no statement more than before. A row
// written before these columns existed reads as Attempt 0 and Fence 0.
//
// # Writes in one process
//
// SQLite lets one connection write at a time; connections that collide back
// off and retry (busy_timeout), which wastes most of the time when many
// goroutines write at once. A Store therefore queues its own writes in Go and
// lets one writer run at a time. When writes queue up, the writer at the head
// runs the whole queue in one transaction (group commit): every statement is
// still one atomic statement, run in order, and every caller hears its result
// only after the commit, so eight goroutines get the throughput of one or
// more rather than a fraction of it. A lone write runs by itself, in autocommit, exactly as raw database/sql
// would. A write gives up with a LockTimeoutError when no writer of the Store
// has finished for the busy timeout (5s by default). Other processes, and
// other users of the same *sql.DB, meet the Store at SQLite's write lock and
// its busy timeout.
//
// # Transactions
//
// Store implements store.Transactor: InTx runs Claim, the caller's own writes
// and Complete in one *sql.Tx, reachable from the context with TxFrom, so the
// key, the effect and the stored response commit or roll back together. A
// concurrent duplicate waits for the write lock and then replays the
// committed response. A Store method called with a context that carries one of
// this Store's transactions runs inside that transaction, and InTx called with
// such a context runs fn in a SAVEPOINT of it.
//
// Store also implements store.Purger: Purge deletes records whose retention
// is over, and in-progress records whose lease lapsed more than
// store.LapsedKept ago, in bounded batches, using the index on expires_at.
package sqlite
