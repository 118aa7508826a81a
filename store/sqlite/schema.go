package sqlite

import (
	"context"
	"fmt"
	"strings"
)

// Stored values of the status column.
const (
	statusInProgress = 1
	statusCompleted  = 2
)

// Schema returns the SQL that creates the table a Store built with the same
// options uses (DefaultTable unless WithTable names another) and its expiry
// index, for those who put it in their own migrations. Both statements use
// IF NOT EXISTS. Migrate runs exactly this. It fails only for an invalid
// option, as Open and New do.
//
// Times are INTEGER unix microseconds. status is 1 (in progress) or 2
// (completed). expires_at is when the record becomes absent: the end of the
// lease while in progress (then equal to locked_until), the end of the
// retention once completed (then locked_until is 0). attempt and fence are
// the record's store.Record.Attempt and Fence, which every claim that
// acquires the key sets; a row written before they existed (a table
// Migrate upgraded) holds 0 in both until a claim acquires its key again.
// To upgrade a table of an earlier version in your own migrations, add
// the two columns as Migrate does:
//
//	ALTER TABLE idempotency_keys ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
//	ALTER TABLE idempotency_keys ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
func Schema(opts ...Option) (string, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return "", fmt.Errorf("sqlite: schema: %w", err)
	}
	return schemaSQL(o.table), nil
}

// Schema returns the SQL for this Store's table; see the package-level Schema.
func (s *Store) Schema() string { return schemaSQL(s.table) }

func schemaSQL(table string) string {
	return tableSQL(table) + ";\n" + indexSQL(table) + ";\n"
}

func tableSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + quoteIdent(table) + ` (
	key          TEXT    NOT NULL PRIMARY KEY,
	fingerprint  TEXT    NOT NULL,
	token        TEXT    NOT NULL,
	status       INTEGER NOT NULL,
	response     BLOB,
	locked_until INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	attempt      INTEGER NOT NULL DEFAULT 0,
	fence        INTEGER NOT NULL DEFAULT 0
)`
}

func indexSQL(table string) string {
	return `CREATE INDEX IF NOT EXISTS ` + quoteIdent(table+indexSuffix) + ` ON ` + quoteIdent(table) + ` (expires_at)`
}

// quoteIdent quotes name as one SQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// column is one column the Store reads and writes, with the type affinity
// it needs. add, for a column that later versions added, is its ALTER TABLE
// … ADD COLUMN definition: Migrate adds it to an older table.
type column struct{ name, affinity, add string }

// wantColumns are the columns the Store reads and writes.
var wantColumns = []column{
	{name: "key", affinity: "TEXT"},
	{name: "fingerprint", affinity: "TEXT"},
	{name: "token", affinity: "TEXT"},
	{name: "status", affinity: "INTEGER"},
	{name: "response", affinity: "BLOB"},
	{name: "locked_until", affinity: "INTEGER"},
	{name: "expires_at", affinity: "INTEGER"},
	// Since the attempt count and fencing token (store.Record.Attempt and
	// Fence): 0 in rows written before.
	{name: "attempt", affinity: "INTEGER", add: "attempt INTEGER NOT NULL DEFAULT 0"},
	{name: "fence", affinity: "INTEGER", add: "fence INTEGER NOT NULL DEFAULT 0"},
}

// Migrate creates the table and its index if they do not exist (see Schema),
// then checks that the table has the columns the Store needs and that key is
// its primary key, so a table of the same name made for something else fails
// here with a clear error instead of at the first Claim. A table made by an
// earlier version of this package, without the attempt and fence columns,
// is upgraded in place: Migrate adds them (ALTER TABLE … ADD COLUMN, 0 in
// the rows already there) in one transaction that holds SQLite's write
// lock and looks at the table again first. Running it again, or from
// several processes at once, is harmless. It also prepares the Store's
// statements, so call it even when your own migrations made the table.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer unlock()
	// Statement by statement, each its own transaction: both creations are
	// IF NOT EXISTS, and a single statement waits for the write lock under
	// busy_timeout however the pool begins its transactions.
	if _, err := s.db.ExecContext(ctx, tableSQL(s.table)); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	// Check the table before indexing it: a table of the wrong shape is
	// reported as such, not as a failed CREATE INDEX.
	missing, err := verifyTable(ctx, s.db, s.table)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if len(missing) > 0 {
		if err := s.upgrade(ctx); err != nil {
			return fmt.Errorf("sqlite: migrate: upgrade table %s: %w", quoteIdent(s.table), err)
		}
	}
	if _, err := s.db.ExecContext(ctx, indexSQL(s.table)); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if err := s.prepareAll(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// upgrade adds the columns an older table lacks, in one transaction that
// takes SQLite's write lock with its first statement (however db begins
// transactions) and then reads the table's columns again: of several
// processes upgrading at once, the first adds them and the others, which
// waited for its commit under the busy timeout, find nothing to add.
func (s *Store) upgrade(ctx context.Context) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, buildQuery(stmtLock, quoteIdent(s.table))); err != nil {
		return err
	}
	missing, err := verifyTable(ctx, tx, s.table)
	if err != nil {
		return err
	}
	for _, c := range missing {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+quoteIdent(s.table)+` ADD COLUMN `+c.add); err != nil {
			return fmt.Errorf("add column %q: %w", c.name, err)
		}
	}
	return tx.Commit()
}

// verifyTable checks the columns of an existing table. A column that a
// later version added (column.add) and the table lacks is no error: it is
// returned in missing, for Migrate to add.
func verifyTable(ctx context.Context, q querier, table string) (missing []column, err error) {
	rows, err := q.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?1)`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type col struct {
		typ string
		pk  int
	}
	have := map[string]col{}
	for rows.Next() {
		var name, typ string
		var pk int
		if err := rows.Scan(&name, &typ, &pk); err != nil {
			return nil, err
		}
		have[strings.ToLower(name)] = col{strings.ToUpper(typ), pk}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("table %s does not exist", quoteIdent(table))
	}
	for _, w := range wantColumns {
		c, ok := have[w.name]
		if !ok && w.add != "" {
			missing = append(missing, w)
			continue
		}
		if !ok {
			return nil, fmt.Errorf("table %s exists but has no column %q: it is not an idemkit table, or one of another version (see sqlite.Schema)", quoteIdent(table), w.name)
		}
		if got := affinity(c.typ); got != w.affinity {
			return nil, fmt.Errorf("table %s: column %q has type %q (%s affinity), want %s (see sqlite.Schema)", quoteIdent(table), w.name, c.typ, got, w.affinity)
		}
	}
	if have["key"].pk != 1 {
		return nil, fmt.Errorf("table %s: column \"key\" is not its primary key (see sqlite.Schema)", quoteIdent(table))
	}
	for _, c := range have {
		if c.pk > 1 {
			return nil, fmt.Errorf("table %s: its primary key has more columns than \"key\" (see sqlite.Schema)", quoteIdent(table))
		}
	}
	return missing, nil
}

// affinity applies SQLite's rules for the type affinity of a declared column
// type (https://sqlite.org/datatype3.html, 3.1).
func affinity(typ string) string {
	t := strings.ToUpper(typ)
	switch {
	case strings.Contains(t, "INT"):
		return "INTEGER"
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return "TEXT"
	case t == "" || strings.Contains(t, "BLOB"):
		return "BLOB"
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}
