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
// retention once completed (then locked_until is 0).
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
	expires_at   INTEGER NOT NULL
)`
}

func indexSQL(table string) string {
	return `CREATE INDEX IF NOT EXISTS ` + quoteIdent(table+indexSuffix) + ` ON ` + quoteIdent(table) + ` (expires_at)`
}

// quoteIdent quotes name as one SQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// columns the Store reads and writes, with the type affinity each needs.
var wantColumns = []struct{ name, affinity string }{
	{"key", "TEXT"},
	{"fingerprint", "TEXT"},
	{"token", "TEXT"},
	{"status", "INTEGER"},
	{"response", "BLOB"},
	{"locked_until", "INTEGER"},
	{"expires_at", "INTEGER"},
}

// Migrate creates the table and its index if they do not exist (see Schema),
// then checks that the table has the columns the Store needs and that key is
// its primary key, so a table of the same name made for something else fails
// here with a clear error instead of at the first Claim. Running it again, or
// from several processes at once, is harmless. It also prepares the Store's
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
	if err := verifyTable(ctx, s.db, s.table); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, indexSQL(s.table)); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if err := s.prepareAll(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// verifyTable checks the columns of an existing table.
func verifyTable(ctx context.Context, q querier, table string) error {
	rows, err := q.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?1)`, table)
	if err != nil {
		return err
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
			return err
		}
		have[strings.ToLower(name)] = col{strings.ToUpper(typ), pk}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(have) == 0 {
		return fmt.Errorf("table %s does not exist", quoteIdent(table))
	}
	for _, w := range wantColumns {
		c, ok := have[w.name]
		if !ok {
			return fmt.Errorf("table %s exists but has no column %q: it is not an idemkit table, or one of another version (see sqlite.Schema)", quoteIdent(table), w.name)
		}
		if got := affinity(c.typ); got != w.affinity {
			return fmt.Errorf("table %s: column %q has type %q (%s affinity), want %s (see sqlite.Schema)", quoteIdent(table), w.name, c.typ, got, w.affinity)
		}
	}
	if have["key"].pk != 1 {
		return fmt.Errorf("table %s: column \"key\" is not its primary key (see sqlite.Schema)", quoteIdent(table))
	}
	for _, c := range have {
		if c.pk > 1 {
			return fmt.Errorf("table %s: its primary key has more columns than \"key\" (see sqlite.Schema)", quoteIdent(table))
		}
	}
	return nil
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
