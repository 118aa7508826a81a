package sqlite

import (
	"time"
)

// DefaultTable is the table a Store uses unless WithTable says otherwise.
const DefaultTable = "idemkit_keys"

// Defaults for the options below.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultPurgeBatch  = 1000
)

// Option configures Open and New.
type Option func(*options)

type options struct {
	table       string
	now         func() time.Time
	busyTimeout time.Duration
	purgeBatch  int
	pragmas     []string
	maxConns    int
}

func defaultOptions() options {
	return options{
		table:       DefaultTable,
		now:         time.Now,
		busyTimeout: DefaultBusyTimeout,
		purgeBatch:  DefaultPurgeBatch,
		maxConns:    8,
	}
}

// WithTable sets the name of the table that holds the keys (default
// DefaultTable). The name is one SQL identifier and is quoted wherever it is
// used, so any name without a NUL byte is safe; the expiry index is named
// after it with the suffix "_expires_at".
func WithTable(name string) Option {
	return func(o *options) { o.table = name }
}

// WithClock sets the clock the Store reads to decide when leases and
// retentions are over (default time.Now). Tests pass a manual clock so they
// can move time forward without sleeping.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithBusyTimeout sets how long a write waits for the write lock before it
// fails (default DefaultBusyTimeout). In the Store's own queue of writes (Open
// and New) a write fails with a LockTimeoutError once no other write has
// finished for that long; with Open it is also every connection's PRAGMA
// busy_timeout, the wait for other processes. With New, set busy_timeout in
// the DSN of your *sql.DB as well.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.busyTimeout = d
		}
	}
}

// WithPurgeBatch sets how many records one Purge statement deletes at most
// (default DefaultPurgeBatch). Purge runs batch after batch, each its own short
// write, so other writers are never held up by more than one batch.
func WithPurgeBatch(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.purgeBatch = n
		}
	}
}

// WithPragma adds a PRAGMA that Open runs on every connection it opens, in
// modernc.org/sqlite's "_pragma" form: WithPragma("synchronous(FULL)") makes
// every commit reach the disk before it returns (survives a power loss, not
// only a process crash), WithPragma("foreign_keys(1)") turns on foreign keys.
// A pragma of the same name as one of Open's (busy_timeout, journal_mode,
// synchronous) replaces it. New ignores WithPragma: configure the *sql.DB you
// pass.
func WithPragma(pragma string) Option {
	return func(o *options) { o.pragmas = append(o.pragmas, pragma) }
}

// WithMaxConns sets the size of the connection pool Open creates (default 8;
// readers in WAL mode run in parallel, and the Store's own writes use one
// connection at a time). A ":memory:" database always has exactly one
// connection. New ignores it.
func WithMaxConns(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxConns = n
		}
	}
}
