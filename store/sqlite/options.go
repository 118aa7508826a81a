package sqlite

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/invalid"
)

// DefaultTable is the table a Store uses unless WithTable says otherwise. It
// is the same on every SQL backend of idemkit.
const DefaultTable = "idempotency_keys"

// MaxTableLen is the longest table name WithTable accepts, in bytes: the
// same limit as every SQL backend of idemkit, so a name valid on one is
// valid on all (PostgreSQL's 63-byte identifiers less the index suffix).
const MaxTableLen = 48

// indexSuffix names the expiry index after its table, as on PostgreSQL.
const indexSuffix = "_expires_at_idx"

// Defaults for the options below.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultPurgeBatch  = 1000
	DefaultMaxConns    = 8
)

// Option configures Open and New. An invalid value is reported by Open or
// New (an error matching store.ErrInvalid), never silently replaced.
type Option func(*options) error

type options struct {
	table       string
	now         func() time.Time
	busyTimeout time.Duration
	purgeBatch  int
	pragmas     []pragma
	maxConns    int
	// openOnly names the options given that only Open can apply.
	openOnly []string
}

func defaultOptions() options {
	return options{
		table:       DefaultTable,
		now:         time.Now,
		busyTimeout: DefaultBusyTimeout,
		purgeBatch:  DefaultPurgeBatch,
		maxConns:    DefaultMaxConns,
	}
}

// buildOptions applies opts to the defaults and returns the first problem
// with them, wrapped in store.ErrInvalid.
func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	if err := invalid.Apply(&o, opts); err != nil {
		return o, err
	}
	return o, nil
}

// WithTable sets the name of the table that holds the keys (default
// DefaultTable). The name is one SQL identifier and is quoted wherever it is
// used, so any name of valid UTF-8 without a NUL byte, at most MaxTableLen
// bytes, is safe; the expiry index is named after it with the suffix
// "_expires_at_idx".
func WithTable(name string) Option {
	return func(o *options) error {
		o.table = name
		return checkTable(name)
	}
}

// WithClock sets the clock the Store reads to decide when leases and
// retentions are over (default time.Now). Tests pass a manual clock so they
// can move time forward without sleeping. A nil clock is an error.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("WithClock(nil): pass a clock such as time.Now")
		}
		o.now = now
		return nil
	}
}

// WithBusyTimeout sets how long a write waits for the write lock before it
// fails (default DefaultBusyTimeout). In the Store's own queue of writes (Open
// and New) a write fails with a LockTimeoutError once no other write has
// finished for that long; with Open it is also every connection's PRAGMA
// busy_timeout, the wait for other processes. With New, set busy_timeout in
// the DSN of your *sql.DB as well. A timeout that is not positive is an error.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("WithBusyTimeout(%v): pass a positive timeout", d)
		}
		o.busyTimeout = d
		return nil
	}
}

// WithPurgeBatch sets how many records one Purge statement deletes at most
// (default DefaultPurgeBatch). Purge runs batch after batch, each its own short
// write, so other writers are never held up by more than one batch. A batch
// that is not positive is an error.
func WithPurgeBatch(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithPurgeBatch(%d): pass a positive number of records", n)
		}
		o.purgeBatch = n
		return nil
	}
}

// WithPragma adds a PRAGMA that Open runs on every connection it opens, in
// modernc.org/sqlite's "_pragma" form: WithPragma("synchronous(FULL)") makes
// every commit reach the disk before it returns (survives a power loss, not
// only a process crash), WithPragma("foreign_keys(1)") turns on foreign keys.
// A pragma of the same name as one of Open's (busy_timeout, journal_mode,
// synchronous) replaces it.
//
// Names and values are checked: WithPragma takes synchronous, journal_mode,
// locking_mode, temp_store, secure_delete, foreign_keys,
// recursive_triggers, cell_size_check, trusted_schema (each with the words
// SQLite documents, ON/OFF or 1/0 for the booleans), and busy_timeout,
// cache_size, mmap_size, wal_autocheckpoint, journal_size_limit (integers),
// written name(value) or name=value. Anything else ("nonsense",
// synchronous(FUL)) is an error matching store.ErrInvalid, and so is a
// pragma that SQLite does not report back after Open (a value the driver
// or the build ignored): you never believe you have a durability you do not
// have. Only Open can apply it: New returns an error for it (put the pragma
// in the DSN of the *sql.DB you pass).
func WithPragma(pragma string) Option {
	return func(o *options) error {
		o.openOnly = append(o.openOnly, "WithPragma")
		if strings.TrimSpace(pragma) == "" {
			return errors.New(`WithPragma(""): pass a pragma such as "synchronous(FULL)"`)
		}
		p, err := parsePragma(pragma)
		if err != nil {
			return err
		}
		o.pragmas = append(o.pragmas, p)
		return nil
	}
}

// WithMaxConns sets the size of the connection pool Open creates (default
// DefaultMaxConns; readers in WAL mode run in parallel, and the Store's own
// writes use one connection at a time). A ":memory:" database always has
// exactly one connection. A size that is not positive is an error. Only Open
// can apply it: New returns an error for it (call SetMaxOpenConns on the
// *sql.DB you pass).
func WithMaxConns(n int) Option {
	return func(o *options) error {
		o.openOnly = append(o.openOnly, "WithMaxConns")
		if n <= 0 {
			return fmt.Errorf("WithMaxConns(%d): pass a positive number of connections", n)
		}
		o.maxConns = n
		return nil
	}
}

func checkTable(name string) error {
	switch {
	case name == "":
		return errors.New("WithTable: empty table name: pass a name, or leave the option out for the default")
	case len(name) > MaxTableLen:
		return fmt.Errorf("WithTable: table name is %d bytes: pass at most %d", len(name), MaxTableLen)
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return errors.New("WithTable: table name is not valid UTF-8 without NUL: pass one that is")
	}
	return nil
}
