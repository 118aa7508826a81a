package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

var (
	_ store.Store      = (*Store)(nil)
	_ store.Purger     = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// Store is a store.Store, store.Purger and store.Transactor on a SQLite
// database. It is safe for concurrent use. Make one with Open or New, call
// Migrate (harmless when your own migrations already made the table from
// Schema), and Close it when done.
type Store struct {
	db        *sql.DB
	owned     bool // made by Open: Close closes db
	immediate bool // db begins write transactions with BEGIN IMMEDIATE
	table     string
	now       func() time.Time
	wait      time.Duration
	batch     int

	// gate admits one writer at a time: the leader of the write queue, an
	// InTx, or Migrate (see the package doc and batch.go).
	gate  chan struct{}
	queue writeQueue
	// reads bounds the reads running at once outside InTx (see
	// runner.record) to the size of the pool Open makes.
	reads chan struct{}
	// epoch and lastProgress (nanoseconds since epoch, on the monotonic
	// clock) tell when a writer last finished.
	epoch        time.Time
	lastProgress atomic.Int64
	// claimHint leans towards writing first (above zero) when recent
	// claims mostly acquired, and towards reading first when they mostly
	// found a record they would not change (see runner.claim).
	claimHint atomic.Int32
	// onWait, when set (by tests), is called when a write finds the gate taken.
	onWait func()
	// onGroup, when set (by tests), is called after a group of writes ran
	// in one transaction, with its size and whether it committed.
	onGroup func(size int, committed bool)
	// onPurgeBatch, when set (by tests), is called after each Purge statement.
	onPurgeBatch func(n int64)
	// onStmt, when set (by tests), is called with a statement's id each
	// time a caller is about to read with it (runner.record) or submit it
	// as a write (runner.write, runner.tryWrite).
	onStmt func(id stmtID)

	stmts     [numStmts]preparedStmt
	closeOnce sync.Once
	closeErr  error
}

// New returns a Store on db, a database opened with a SQLite driver
// (modernc.org/sqlite, or another registered for SQLite 3.35 or later, for
// RETURNING). New
// does not touch the database; call Migrate to create the table and prepare
// the statements.
//
// New cannot choose how db opens its connections, so configure them in its
// DSN: WAL (journal_mode(WAL)) lets readers run beside the writer, and a busy
// timeout (busy_timeout(5000)) makes writers of other processes, or other
// users of db, wait for the write lock instead of failing at once with
// SQLITE_BUSY. Every transaction the Store begins on db starts with a write to
// its table, so it holds the write lock from its first statement even when db
// begins transactions DEFERRED: a transaction that reads before it writes
// cannot fail with SQLITE_BUSY halfway (which busy_timeout does not cure).
// Close does not close db.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("sqlite: new: %w: nil *sql.DB", store.ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: new: %w", err)
	}
	if len(o.openOnly) > 0 {
		return nil, fmt.Errorf("sqlite: new: %w: %s applies only to Open; configure the *sql.DB you pass instead",
			store.ErrInvalid, strings.Join(o.openOnly, " and "))
	}
	return newStore(db, o), nil
}

func newStore(db *sql.DB, o options) *Store {
	s := &Store{
		db:    db,
		table: o.table,
		now:   o.now,
		wait:  o.busyTimeout,
		batch: o.purgeBatch,
		gate:  make(chan struct{}, 1),
		reads: make(chan struct{}, max(1, o.maxConns)),
		epoch: time.Now(),
	}
	for i := range s.stmts {
		s.stmts[i].query = buildQuery(stmtID(i), quoteIdent(o.table))
	}
	return s
}

// DB returns the database the Store uses, for the caller's own statements
// outside InTx. With Open, its write transactions begin IMMEDIATE (pass
// &sql.TxOptions{ReadOnly: true} to BeginTx for a read-only one).
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the name of the Store's table as its statements write it:
// quoted as an identifier, as on every SQL backend of idemkit.
func (s *Store) Table() string { return quoteIdent(s.table) }

// Close releases the Store's prepared statements and, when the Store was made
// by Open, closes the database. It is safe to call more than once; the Store
// must not be used afterwards.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := range s.stmts {
			if err := s.stmts[i].close(); err != nil {
				errs = append(errs, err)
			}
		}
		if s.owned {
			if err := s.db.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlite: close: %w", err)
		}
	})
	return s.closeErr
}

// lock waits for the Store's write gate, as long as other writers keep
// finishing and at most the busy timeout after the last one did, and returns
// the function that opens it again.
func (s *Store) lock(ctx context.Context) (func(), error) {
	select {
	case s.gate <- struct{}{}:
		return s.unlock, nil
	default:
	}
	if s.onWait != nil {
		s.onWait()
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	for {
		select {
		case s.gate <- struct{}{}:
			return s.unlock, nil
		case <-ctx.Done():
			return nil, errWaiting(ctx.Err())
		case <-t.C:
			if d := s.sinceProgress(); d < s.wait {
				t.Reset(s.wait - d)
				continue
			}
			return nil, &LockTimeoutError{Wait: s.wait}
		}
	}
}

func (s *Store) unlock() {
	s.progressed()
	<-s.gate
}

// LockTimeoutError reports that a write of a Store waited for the busy
// timeout without any other write of that Store finishing: usually an InTx
// that runs too long, or a call made inside InTx's fn with a context that
// does not carry its transaction (use the Store and the context passed to fn).
type LockTimeoutError struct {
	Wait time.Duration
}

func (e *LockTimeoutError) Error() string {
	return fmt.Sprintf("waited %v for the write lock, held all that time by another writer of this store", e.Wait)
}

// micros converts t to the stored form.
func micros(t time.Time) int64 { return t.UnixMicro() }

// durMicros converts a positive duration to microseconds, rounding up so a
// lease shorter than 1µs still lasts.
func durMicros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}
