package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/store"
)

// DefaultTable is the table a Store uses unless WithTable names another (the
// same default as store/postgres).
const DefaultTable = "idempotency_keys"

// DefaultPurgeBatch is how many rows Purge deletes per statement unless
// WithPurgeBatch says otherwise.
const DefaultPurgeBatch = 1000

// maxTableLen is the SQL backends' common limit on a table name, in bytes
// (docs/DESIGN.md); "<table>_expires_at_idx" then stays within MySQL's
// 64-character limit on index names.
const maxTableLen = 48

const indexSuffix = "_expires_at_idx"

// Store is a store.Store, store.Purger and store.Transactor on a MySQL or
// MariaDB (InnoDB) table, reached through a *sql.DB opened with the driver
// github.com/go-sql-driver/mysql. It is safe for concurrent use.
//
// When a method's context carries a transaction begun by this Store's InTx
// (see TxFrom), the method runs in that transaction instead of on the
// Store's *sql.DB, so code inside InTx may use the Store without waiting for
// the locks its own transaction holds. Transactions of other Stores are
// never joined.
type Store struct {
	db    *sql.DB
	opts  options
	table string // quoted with backticks
	stmts *stmtCache
	stats *stats

	// closeDB, set when store.Open made the *sql.DB, closes it.
	closeDB   func() error
	closeOnce sync.Once
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Purger     = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// stats counts what tests want to see happen.
type stats struct {
	deadlocks atomic.Int64 // autocommit statements retried after a deadlock (1213)
	txRetries atomic.Int64 // InTx transactions run again after a deadlock rolled them back
}

type options struct {
	table      string
	purgeBatch int
}

// Option configures a Store. An invalid value or a nil option is reported
// by New (an error matching store.ErrInvalid that names the option), never
// silently replaced.
type Option func(*options) error

// WithTable sets the table's name (DefaultTable otherwise). It is always
// quoted as an identifier, so any name MySQL accepts is safe: at most 48
// bytes of UTF-8 within the Basic Multilingual Plane, no NUL, no trailing
// space. An invalid name makes New fail with an error matching
// store.ErrInvalid.
func WithTable(name string) Option {
	return func(o *options) error {
		o.table = name
		return checkIdent(name)
	}
}

// WithPurgeBatch sets how many rows each of Purge's DELETE statements removes
// (DefaultPurgeBatch otherwise), which bounds how long it holds row locks;
// n must be positive.
func WithPurgeBatch(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithPurgeBatch(%d): pass a positive number of rows", n)
		}
		o.purgeBatch = n
		return nil
	}
}

// New returns a Store that keeps its records in a table reached through db,
// which must come from the driver github.com/go-sql-driver/mysql (any DSN
// flags: the Store does not depend on parseTime, loc, time_zone,
// clientFoundRows or interpolateParams). It does not touch the database:
// create the table with Migrate or with the SQL from Schema first. New fails
// only for a nil db or an invalid option, with an error that matches
// store.ErrInvalid. Close does not close db.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("mysql: new: %w: nil *sql.DB", store.ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	table := quoteIdent(o.table)
	return &Store{
		db:    db,
		opts:  o,
		table: table,
		stmts: newStmtCache(buildStatements(table)),
		stats: new(stats),
	}, nil
}

func buildOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable, purgeBatch: DefaultPurgeBatch}
	if err := invalid.Apply(&o, opts); err != nil {
		return o, fmt.Errorf("mysql: new: %w", err)
	}
	return o, nil
}

func checkIdent(name string) error {
	switch {
	case name == "":
		return errors.New("WithTable: empty table name: pass a name, or leave the option out for the default")
	case len(name) > maxTableLen:
		return fmt.Errorf("WithTable: table name is %d bytes: pass at most %d", len(name), maxTableLen)
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return errors.New("WithTable: table name is not valid UTF-8 without NUL: pass one that is")
	case strings.HasSuffix(name, " "):
		return errors.New("WithTable: table name ends with a space, which MySQL drops: remove it")
	}
	for _, r := range name {
		if r > 0xFFFF {
			return fmt.Errorf("WithTable: table name contains %q, outside the Basic Multilingual Plane: MySQL cannot store it", r)
		}
	}
	return nil
}

func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// Table returns the table's name as the Store's statements write it: quoted
// with backticks.
func (s *Store) Table() string { return s.table }

// Close releases the statements the Store prepared on its *sql.DB's
// connections, and closes the *sql.DB when store.Open made it; one passed to
// New stays open. It is safe to call twice.
func (s *Store) Close() error {
	err := s.stmts.close()
	s.closeOnce.Do(func() {
		if s.closeDB != nil {
			err = errors.Join(err, s.closeDB())
		}
	})
	return err
}

// stmtCache prepares each statement on the *sql.DB the first time it is
// used outside a transaction; database/sql then prepares it once per
// connection, and transactions reuse it through Tx.StmtContext.
type stmtCache struct {
	sql  [numStmts]string
	mu   sync.Mutex // held by close
	prep [numStmts]atomic.Pointer[sql.Stmt]
}

func newStmtCache(q [numStmts]string) *stmtCache { return &stmtCache{sql: q} }

// get returns the prepared statement id, preparing it on db when needed.
// It holds no lock while preparing: two first uses at once both prepare,
// and the one that loses the race closes its statement.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, id stmtID) (*sql.Stmt, error) {
	if st := c.prep[id].Load(); st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, c.sql[id])
	if err != nil {
		return nil, err
	}
	if !c.prep[id].CompareAndSwap(nil, st) {
		_ = st.Close()
		return c.prep[id].Load(), nil
	}
	return st, nil
}

// inTx returns statement id for tx: the cached one bound to tx, which
// database/sql prepares once per connection. Before the first use has
// prepared it, inTx prepares it on db when the pool has a connection to
// spare, waiting at most prepareWait for one: a pool full of transactions
// that all wait for a connection to prepare on would never free one. When
// that fails it prepares the statement on tx's own connection, for this
// transaction only.
func (c *stmtCache) inTx(ctx context.Context, db *sql.DB, tx *sql.Tx, id stmtID) (*sql.Stmt, error) {
	if st := c.prep[id].Load(); st != nil {
		return tx.StmtContext(ctx, st), nil
	}
	if stats := db.Stats(); stats.MaxOpenConnections == 0 || stats.InUse < stats.MaxOpenConnections {
		pctx, cancel := context.WithTimeout(ctx, prepareWait)
		st, err := c.get(pctx, db, id)
		cancel()
		if err == nil {
			return tx.StmtContext(ctx, st), nil
		}
	}
	return tx.PrepareContext(ctx, c.sql[id])
}

// prepareWait bounds how long a transaction's first use of a statement
// waits for a spare connection to prepare it for the whole pool.
const prepareWait = 50 * time.Millisecond

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := range c.prep {
		if st := c.prep[i].Swap(nil); st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// DB returns the *sql.DB the Store runs on.
func (s *Store) DB() *sql.DB { return s.db }
