package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/store"
)

// DB is what a Store needs from its connection: *pgxpool.Pool,
// *pgxpool.Conn, *pgx.Conn and pgx.Tx all satisfy it, so callers bring their
// own pool and settings. Statements go through pgx's default statement cache
// (each is prepared once per connection).
// A *pgx.Conn or a pgx.Tx is not safe for concurrent use, and neither is a
// Store built on one.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultTable is the table a Store uses unless WithTable names another.
const DefaultTable = "idempotency_keys"

// DefaultPurgeBatch is how many rows Purge deletes per statement unless
// WithPurgeBatch says otherwise.
const DefaultPurgeBatch = 1000

// MaxTableLen is the longest table name WithTable accepts, in bytes: it keeps
// "<table>_expires_at_idx" within PostgreSQL's 63-byte identifier limit, so
// index names of different tables never collide. Every SQL backend of
// idemkit has the same limit.
const MaxTableLen = 63 - len(indexSuffix)

const maxTableLen = MaxTableLen

// Store is a store.Store, store.Purger and store.Transactor on a PostgreSQL
// table. It is safe for concurrent use when its DB is (a *pgxpool.Pool).
//
// When a method's context carries a transaction begun by this Store's InTx
// (see TxFrom), the method runs in that transaction instead of on the
// Store's DB, so code inside InTx may use this Store, or the one fn
// receives, without waiting for the locks its own transaction holds. Another
// Store's transaction in the context is ignored: each Store joins only its
// own.
type Store struct {
	db    DB
	opts  options
	table string // quoted, schema-qualified when a schema is set
	sql   statements
	stats *stats
	owner *owner    // whose InTx transactions this Store joins
	batch *batchers // nil when coalescing is off; never set on a Store bound to a transaction

	// closePool, set when store.Open made the pool, closes it.
	closePool func()
	closeOnce sync.Once
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Purger     = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

type options struct {
	table      string
	schema     string
	purgeBatch int
	coalesce   bool
	slots      int // batches of each kind in flight at once
	maxBatch   int // calls per batch at most
}

// Coalescing defaults, chosen by BenchmarkPaired (see WithCoalescing).
const (
	defaultSlots    = 1
	defaultMaxBatch = 64
)

// Option configures a Store. An invalid value or a nil option is reported
// by New and Schema (an error matching store.ErrInvalid that names the
// option), never silently replaced.
type Option func(*options) error

// WithTable sets the table's name (DefaultTable otherwise). It is always
// quoted as an identifier, so it is case-sensitive and may contain any
// character but NUL; at most MaxTableLen (48) bytes.
func WithTable(name string) Option {
	return func(o *options) error {
		o.table = name
		return checkIdent("WithTable", "table", name, maxTableLen)
	}
}

// WithSchema puts the table in the named schema (quoted as an identifier)
// instead of the first schema of the connection's search_path. Migrate
// creates the schema when it does not exist.
func WithSchema(name string) Option {
	return func(o *options) error {
		o.schema = name
		return checkIdent("WithSchema", "schema", name, 63)
	}
}

// WithPurgeBatch sets how many rows each of Purge's DELETE statements removes
// (DefaultPurgeBatch otherwise), which bounds how long it holds row locks.
func WithPurgeBatch(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithPurgeBatch(%d): pass a positive number of rows", n)
		}
		o.purgeBatch = n
		return nil
	}
}

// WithCoalescing turns coalescing on or off; it is off by default. Turn it
// on only with a DB that is safe for concurrent use (a *pgxpool.Pool), and
// where several callers share the Store. Measured with BenchmarkPaired
// (cmd/idembench, medians of 5 rounds, three runs) on a 2-core machine
// under load from other processes (synchronous commit on, pool of 16, the
// store's and raw's operations in alternating phases), 16 callers did
// claim + complete 1.96–2.50× as fast as the same single-key statements
// run raw, one per operation, with rounds of one call per caller
// (CoalescedAlternate), and 1.56–2.11× in longer phases; 2 and 4 callers
// 0.85–1.79×; one caller as fast as without coalescing (0.95–0.97).
//
// With coalescing, concurrent Claims and Completes of the Store are sent
// together: while a statement of the same kind is in flight, further
// callers queue, and the queued claims' INSERTs (or completions'
// UPDATEs) go to the server as one multi-row statement, each caller getting
// its own outcome, exactly the one its own statements would have given. A
// caller alone runs its single-key statements as without coalescing, so one
// caller's latency does not change; under load, fewer statements and
// commits do the same work. When the callers come in rounds (all at once,
// then a pause), the first of a round waits for the others, up to a
// fraction of a batch's duration (at most 1 ms, and no more than 50 µs
// after the last one came), so that the whole round is one statement
// rather than that caller's alone and then the others'. Calls within a
// transaction of InTx are never batched.
//
// A batch commits as one statement, so its callers wait for each other: a
// key locked by another transaction (an uncommitted claim of InTx) holds up
// the whole batch, not only its own claim, until that transaction ends.
func WithCoalescing(on bool) Option {
	return func(o *options) error { o.coalesce = on; return nil }
}

// New returns a Store that keeps its records in a table reached through db.
// It does not touch the database: create the table with Migrate or with the
// SQL from Schema first. New fails only for a nil db or an invalid option,
// with an error that matches store.ErrInvalid. Close does not close db.
func New(db DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("postgres: new: %w: nil DB", store.ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	table := qualified(o.schema, o.table)
	s := &Store{db: db, opts: o, table: table, sql: buildStatements(table), stats: new(stats), owner: new(owner)}
	if o.coalesce {
		s.batch = s.newBatchers()
	}
	return s, nil
}

func buildOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable, purgeBatch: DefaultPurgeBatch, slots: defaultSlots, maxBatch: defaultMaxBatch}
	if err := invalid.Apply(&o, opts); err != nil {
		return o, fmt.Errorf("postgres: new: %w", err)
	}
	return o, nil
}

func checkIdent(opt, what, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: empty %s name: pass a name, or leave the option out for the default", opt, what)
	case len(name) > max:
		return fmt.Errorf("%s: %s name is %d bytes: pass at most %d", opt, what, len(name), max)
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s: %s name is not valid UTF-8 without NUL: pass one that is", opt, what)
	}
	return nil
}

func qualified(schema, table string) string {
	if schema == "" {
		return pgx.Identifier{table}.Sanitize()
	}
	return pgx.Identifier{schema, table}.Sanitize()
}

// Table returns the table's name as the Store's statements write it: quoted,
// and qualified with the schema when WithSchema set one.
func (s *Store) Table() string { return s.table }

// DB returns the connection the Store uses (the pool store.Open made, or the
// DB given to New), for the caller's own statements.
func (s *Store) DB() DB { return s.db }

// Close closes the connection pool when the Store owns it (it was opened
// with store.Open from a URL) and otherwise does nothing: a DB passed to New
// stays the caller's to close. It always returns nil and is safe to call more
// than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.closePool != nil {
			s.closePool()
		}
	})
	return nil
}

// conn returns the transaction of this Store's InTx carried by ctx, or the
// Store's DB.
func (s *Store) conn(ctx context.Context) DB {
	if tx, ok := s.ownTx(ctx); ok {
		return tx
	}
	return s.db
}
