package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// Schema returns the DDL that creates the table a Store built with the same
// options uses, for migration tools: one CREATE TABLE IF NOT EXISTS
// statement, idempotent, accepted by MySQL 8 and MariaDB 10.11 alike (the
// index is declared inline because MySQL has no CREATE INDEX IF NOT EXISTS).
// The columns:
//
//	key          the idempotency key, byte for byte (VARBINARY: no case
//	             folding, no trailing-space padding; 1024 bytes, within
//	             InnoDB's 3072-byte index key limit, which needs the
//	             DYNAMIC row format: older servers default to COMPACT and
//	             its 767 bytes)
//	fingerprint  the request the key was first claimed with
//	token        the claim that holds (status 1) or completed (status 2) it
//	status       1 in progress, 2 completed
//	response     the stored response (completed only)
//	expires_at   end of the lease (in progress) or of the retention
//	             (completed), in UTC from the server's UTC_TIMESTAMP(6)
//	attempt      store.Record.Attempt: the claims that acquired the key
//	             for this record (0 in a row written before the column
//	             existed)
//	fence        store.Record.Fence: grows with every claim that acquires
//	             the key (0 in a row written before the column existed)
//
// With the default options it returns:
//
//	CREATE TABLE IF NOT EXISTS `idempotency_keys` (
//		`key`       VARBINARY(1024) NOT NULL,
//		fingerprint VARBINARY(1024) NOT NULL,
//		token       VARBINARY(128) NOT NULL,
//		status      TINYINT NOT NULL CHECK (status IN (1, 2)),
//		response    LONGBLOB NULL,
//		expires_at  DATETIME(6) NOT NULL,
//		attempt     INT UNSIGNED NOT NULL DEFAULT 0,
//		fence       BIGINT UNSIGNED NOT NULL DEFAULT 0,
//		PRIMARY KEY (`key`),
//		KEY `idempotency_keys_expires_at_idx` (expires_at)
//	) ENGINE=InnoDB ROW_FORMAT=DYNAMIC;
//
// A table created by an earlier version, without attempt and fence, is
// upgraded by Migrate; a migration tool can run the same statement:
//
//	ALTER TABLE `idempotency_keys`
//		ADD COLUMN attempt INT UNSIGNED NOT NULL DEFAULT 0,
//		ADD COLUMN fence BIGINT UNSIGNED NOT NULL DEFAULT 0;
//
// It fails only for the same invalid options as New.
func Schema(opts ...Option) (string, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return "", err
	}
	return createTableSQL(o) + ";\n", nil
}

// Schema returns the DDL for this Store's table; see the package-level Schema.
func (s *Store) Schema() string { return createTableSQL(s.opts) + ";\n" }

func createTableSQL(o options) string {
	return "CREATE TABLE IF NOT EXISTS " + quoteIdent(o.table) + ` (
	` + "`key`" + `       VARBINARY(1024) NOT NULL,
	fingerprint VARBINARY(1024) NOT NULL,
	token       VARBINARY(128) NOT NULL,
	status      TINYINT NOT NULL CHECK (status IN (1, 2)),
	response    LONGBLOB NULL,
	expires_at  DATETIME(6) NOT NULL,
	` + attemptDDL + `,
	` + fenceDDL + `,
	PRIMARY KEY (` + "`key`" + `),
	KEY ` + quoteIdent(o.table+indexSuffix) + ` (expires_at)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC`
}

// The columns added after the first release of the table, as Migrate adds
// them to an older table: the DEFAULT is what the rows already there read.
const (
	attemptDDL = "attempt     INT UNSIGNED NOT NULL DEFAULT 0"
	fenceDDL   = "fence       BIGINT UNSIGNED NOT NULL DEFAULT 0"
)

// addedColumns are the columns Migrate adds to a table made before they
// existed, by name, in the order they are added.
var addedColumns = []struct{ name, ddl string }{
	{"attempt", attemptDDL},
	{"fence", fenceDDL},
}

// errDupFieldName is ER_DUP_FIELDNAME: the column exists already.
const errDupFieldName = 1060

// Migrate creates the Store's table with its index unless it exists. It is
// one CREATE TABLE IF NOT EXISTS, which the server's metadata lock makes
// safe when several processes run it at once; it is idempotent. A table
// made by an earlier version of this package, without the attempt and
// fence columns, is upgraded in place: one ALTER TABLE ... ADD COLUMN adds
// what it lacks, with a DEFAULT of 0 that the rows already there then read
// (their Record.Attempt and Fence are 0; the next claim that takes one over
// counts attempt 2 and a fence from the server's clock). Both MySQL 8 and
// MariaDB add such columns without copying the table. When another process
// adds them first, the duplicate-column error (1060) is taken as done and
// the columns checked again, so concurrent Migrates are safe. It then
// checks that the table (new or not) has the columns the Store needs, of
// byte-exact types and long enough, with key as its primary key, so a table
// of the same name made for something else (a VARCHAR key with a
// case-insensitive collation, say) fails here with a clear error instead of
// folding keys together later. Those who manage their schema with a
// migration tool can use Schema instead, and still call Migrate to check.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, createTableSQL(s.opts)); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	if err := upgradeTable(ctx, s.db, s.opts.table); err != nil {
		return fmt.Errorf("mysql: migrate: upgrade %s: %w", s.table, err)
	}
	if err := verifyTable(ctx, s.db, s.opts.table); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	return nil
}

// upgradeTable adds the addedColumns that the table in the connection's
// current database lacks, in one ALTER TABLE. A duplicate-column error
// means another process added them meanwhile: it looks again.
func upgradeTable(ctx context.Context, db *sql.DB, table string) error {
	for range 3 {
		missing, err := missingColumns(ctx, db, table)
		if err != nil || len(missing) == 0 {
			return err
		}
		_, err = db.ExecContext(ctx, "ALTER TABLE "+quoteIdent(table)+" ADD COLUMN "+strings.Join(missing, ", ADD COLUMN "))
		if err == nil {
			return nil
		}
		if !serverErr(err, errDupFieldName) {
			return err
		}
	}
	return fmt.Errorf("its columns kept changing while it was being upgraded")
}

// missingColumns returns the DDL of the addedColumns the table lacks; none
// for a table that does not exist (verifyTable then says so).
func missingColumns(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		have[strings.ToLower(name)] = true
	}
	if err := rows.Err(); err != nil || len(have) == 0 {
		return nil, err
	}
	var missing []string
	for _, c := range addedColumns {
		if !have[c.name] {
			missing = append(missing, c.ddl)
		}
	}
	return missing, nil
}

// wantColumn is a column the Store needs: one of the data types, at least
// minLen bytes long (VARBINARY), at least precision fractional digits
// (DATETIME).
type wantColumn struct {
	name      string
	types     []string
	minLen    int64
	precision int64
}

var wantColumns = []wantColumn{
	{name: "key", types: []string{"varbinary"}, minLen: 1024},
	{name: "fingerprint", types: []string{"varbinary"}, minLen: 1024},
	{name: "token", types: []string{"varbinary"}, minLen: 128},
	{name: "status", types: []string{"tinyint", "smallint", "mediumint", "int", "bigint"}},
	{name: "response", types: []string{"longblob"}},
	{name: "expires_at", types: []string{"datetime"}, precision: 6},
	{name: "attempt", types: []string{"int", "bigint"}},
	{name: "fence", types: []string{"bigint"}},
}

// verifyTable checks the columns and primary key of the table in the
// connection's current database.
func verifyTable(ctx context.Context, db *sql.DB, table string) error {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COALESCE(CHARACTER_MAXIMUM_LENGTH, 0),
		COALESCE(DATETIME_PRECISION, 0), COLUMN_KEY
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
	if err != nil {
		return err
	}
	defer rows.Close()
	type col struct {
		typ       string
		length    int64
		precision int64
		pk        bool
	}
	have := map[string]col{}
	pks := 0
	for rows.Next() {
		var (
			name, typ, key    string
			length, precision int64
		)
		if err := rows.Scan(&name, &typ, &length, &precision, &key); err != nil {
			return err
		}
		have[strings.ToLower(name)] = col{strings.ToLower(typ), length, precision, key == "PRI"}
		if key == "PRI" {
			pks++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	t := quoteIdent(table)
	if len(have) == 0 {
		return fmt.Errorf("table %s does not exist in the current database", t)
	}
	for _, w := range wantColumns {
		c, ok := have[w.name]
		switch {
		case !ok:
			return fmt.Errorf("table %s exists but has no column %q: it is not an idemkit table, or one of another version (see mysql.Schema)", t, w.name)
		case !slices.Contains(w.types, c.typ):
			return fmt.Errorf("table %s: column %q is %s, want %s (see mysql.Schema)", t, w.name, c.typ, w.types[0])
		case c.length < w.minLen:
			return fmt.Errorf("table %s: column %q holds %d bytes, want at least %d (see mysql.Schema)", t, w.name, c.length, w.minLen)
		case c.precision < w.precision:
			return fmt.Errorf("table %s: column %q keeps %d fractional digits, want %d (see mysql.Schema)", t, w.name, c.precision, w.precision)
		}
	}
	if !have["key"].pk || pks != 1 {
		return fmt.Errorf("table %s: its primary key is not the column \"key\" alone (see mysql.Schema)", t)
	}
	return nil
}
