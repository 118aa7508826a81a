package spanner

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
)

// DefaultTable is the table a Store uses unless WithTable says otherwise.
const DefaultTable = "idempotency_keys"

// Store keeps idempotency keys in one Cloud Spanner table. It is safe for
// concurrent use. Make one with New on a *spanner.Client, or with store.Open
// from a spanner:// URL.
type Store struct {
	client *sp.Client
	table  string
	q      statements
	owner  *owner
	owns   bool          // Close closes client (a Store made by Open)
	gate   chan struct{} // see gate.go; nil against Spanner itself

	// afterRead, when set (by tests), runs right after every read of a
	// key's row; its error fails that read (and its transaction's attempt).
	afterRead func(ctx context.Context) error
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
	_ store.Purger     = (*Store)(nil)
	_ store.Migrator   = (*Store)(nil)
)

// An Option configures a Store made by New.
type Option func(*config) error

type config struct {
	table      string
	purgeBatch int
}

// tableName is what WithTable accepts: a GoogleSQL identifier, as Spanner
// allows for table names (a letter, then letters, digits and underscores,
// at most 128 characters).
var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)

// WithTable sets the table's name (default DefaultTable). It must be a
// letter followed by at most 127 letters, digits or underscores; anything
// else is store.ErrInvalid.
func WithTable(name string) Option {
	return func(c *config) error {
		if !tableName.MatchString(name) {
			return fmt.Errorf("%w: table name %q: use a letter followed by up to 127 letters, digits or underscores", store.ErrInvalid, name)
		}
		c.table = name
		return nil
	}
}

// DefaultPurgeBatch is how many records one transaction of Purge deletes
// unless WithPurgeBatch says otherwise.
const DefaultPurgeBatch = 500

// WithPurgeBatch sets how many records each transaction of Purge deletes
// (default DefaultPurgeBatch). It must be between 1 and 10000: a
// transaction that deletes more holds its locks longer and comes closer to
// Spanner's limit of mutations per commit.
func WithPurgeBatch(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 10000 {
			return fmt.Errorf("%w: purge batch %d: use 1 to 10000", store.ErrInvalid, n)
		}
		c.purgeBatch = n
		return nil
	}
}

// owner identifies a Store made by New, so that only it joins the
// transactions its InTx begins.
type owner struct{ _ byte } // not zero-sized: every owner has its own address

// New returns a Store on client, which stays the caller's: Close leaves it
// open. The table is not created: call Migrate, or run Schema in your own
// migrations. A nil client or a nil or invalid option is store.ErrInvalid.
func New(client *sp.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("spanner: new: %w: nil *spanner.Client", store.ErrInvalid)
	}
	c := config{table: DefaultTable, purgeBatch: DefaultPurgeBatch}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("spanner: new: %w: option %d is nil", store.ErrInvalid, i)
		}
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("spanner: new: %w", err)
		}
	}
	return &Store{client: client, table: c.table, q: newStatements(c.table, c.purgeBatch), owner: &owner{},
		gate: gate(client.DatabaseName())}, nil
}

// Table returns the name of the Store's table.
func (s *Store) Table() string { return s.table }

// Close closes the client when the Store was made by store.Open, and
// otherwise does nothing: a client passed to New stays the caller's.
func (s *Store) Close() error {
	if s.owns {
		s.client.Close()
	}
	return nil
}

// wrap makes err the error of operation op: "spanner: op: cause". When ctx
// has ended, the error matches ctx.Err() whatever the client made of it.
func wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("spanner: %s: %w (%v)", op, cerr, err)
	}
	return fmt.Errorf("spanner: %s: %w", op, err)
}
