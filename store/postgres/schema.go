package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const indexSuffix = "_expires_at_idx"

// migrateLockID is the pg_advisory_xact_lock key Migrate holds, so that two
// processes migrating at once run one after the other (CREATE ... IF NOT
// EXISTS alone can still fail on a concurrent creation of the same type).
const migrateLockID int64 = 0x69_64_65_6d_6b_69_74 // "idemkit"

// Schema returns the DDL that creates the table a Store built with the same
// options uses, for migration tools: a table with the key as primary key
// (COLLATE "C": keys compare byte for byte) and an index on expires_at for
// Purge. Every statement is idempotent (IF NOT EXISTS). The columns:
//
//	key          the idempotency key
//	fingerprint  the request the key was first claimed with
//	token        the claim that holds (status 1) or completed (status 2) it
//	status       1 in progress, 2 completed
//	response     the stored response (completed only)
//	expires_at   end of the lease (in progress) or of the retention (completed)
//	attempt      store.Record.Attempt: the claims that acquired the record
//	fence        store.Record.Fence: grows with every claim that acquires the key
//
// The last statement adds attempt and fence to a table made before they
// existed, in place and without rewriting it: its rows then read as attempt
// 1 and fence 0, and the next claim that acquires such a key sets both as
// store.Successor says. On a current table it changes nothing, but like any
// ALTER TABLE it first waits for an exclusive lock on the table (behind
// every transaction that used it, and ahead of every later one); Migrate
// runs it only when a column is missing.
//
// With the default options it returns:
//
//	CREATE TABLE IF NOT EXISTS "idempotency_keys" (
//		key         text COLLATE "C" PRIMARY KEY,
//		fingerprint text NOT NULL,
//		token       text NOT NULL,
//		status      smallint NOT NULL CHECK (status IN (1, 2)),
//		response    bytea,
//		expires_at  timestamptz NOT NULL,
//		attempt     integer NOT NULL DEFAULT 0,
//		fence       bigint NOT NULL DEFAULT 0
//	);
//	CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
//	ALTER TABLE "idempotency_keys" ADD COLUMN IF NOT EXISTS attempt integer NOT NULL DEFAULT 0,
//		ADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT 0;
//
// It fails only for the same invalid options as New.
func Schema(opts ...Option) (string, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return "", err
	}
	return schemaSQL(o), nil
}

// Schema returns the DDL for this Store's table; see the package-level Schema.
func (s *Store) Schema() string { return schemaSQL(s.opts) }

func schemaSQL(o options) string {
	var out string
	if o.schema != "" {
		out = createSchemaSQL(o) + ";\n"
	}
	return out + createTableSQL(o) + ";\n" + createIndexSQL(o) + ";\n" + addColumnsSQL(o) + ";\n"
}

func createSchemaSQL(o options) string {
	return "CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{o.schema}.Sanitize()
}

func createTableSQL(o options) string {
	return `CREATE TABLE IF NOT EXISTS ` + qualified(o.schema, o.table) + ` (
	key         text COLLATE "C" PRIMARY KEY,
	fingerprint text NOT NULL,
	token       text NOT NULL,
	status      smallint NOT NULL CHECK (status IN (1, 2)),
	response    bytea,
	expires_at  timestamptz NOT NULL,
	attempt     integer NOT NULL DEFAULT 0,
	fence       bigint NOT NULL DEFAULT 0
)`
}

// addColumnsSQL upgrades a table made before the attempt and fence columns.
// A constant default makes each a change of the catalog only: no rewrite of
// the table, whatever its size.
func addColumnsSQL(o options) string {
	return "ALTER TABLE " + qualified(o.schema, o.table) + " ADD COLUMN IF NOT EXISTS attempt integer NOT NULL DEFAULT 0,\n" +
		"\tADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT 0"
}

// missingColumnsSQL counts the columns addColumnsSQL adds that the table
// (named by $1 as Store.Table writes it) lacks.
const missingColumnsSQL = `SELECT 2 - count(*) FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname IN ('attempt', 'fence') AND attnum > 0 AND NOT attisdropped`

func createIndexSQL(o options) string {
	return "CREATE INDEX IF NOT EXISTS " + pgx.Identifier{o.table + indexSuffix}.Sanitize() +
		" ON " + qualified(o.schema, o.table) + " (expires_at)"
}

// Migrate creates the Store's schema (when WithSchema named one), table and
// index unless they exist, and adds the attempt and fence columns to a table
// made before them (see Schema), in one transaction that holds an advisory
// lock, so it is idempotent and safe when several processes run it at once.
// It alters the table only when a column is missing, so that on a current
// table it never queues for ALTER TABLE's exclusive lock, which would hold
// up every reader of the table behind it. Those who manage their schema
// with a migration tool can use Schema instead.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	tx, err := s.conn(ctx).Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	stmts := []string{"SELECT pg_advisory_xact_lock(" + fmt.Sprint(migrateLockID) + ")"}
	if s.opts.schema != "" {
		stmts = append(stmts, createSchemaSQL(s.opts))
	}
	stmts = append(stmts, createTableSQL(s.opts), createIndexSQL(s.opts))
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	var missing int
	if err := tx.QueryRow(ctx, missingColumnsSQL, s.table).Scan(&missing); err != nil {
		return fmt.Errorf("postgres: migrate: look for the attempt and fence columns: %w", err)
	}
	if missing > 0 {
		if _, err := tx.Exec(ctx, addColumnsSQL(s.opts)); err != nil {
			return fmt.Errorf("postgres: migrate: add the attempt and fence columns: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	return nil
}
