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
//
// With the default options it returns:
//
//	CREATE TABLE IF NOT EXISTS "idempotency_keys" (
//		key         text COLLATE "C" PRIMARY KEY,
//		fingerprint text NOT NULL,
//		token       text NOT NULL,
//		status      smallint NOT NULL CHECK (status IN (1, 2)),
//		response    bytea,
//		expires_at  timestamptz NOT NULL
//	);
//	CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
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
	return out + createTableSQL(o) + ";\n" + createIndexSQL(o) + ";\n"
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
	expires_at  timestamptz NOT NULL
)`
}

func createIndexSQL(o options) string {
	return "CREATE INDEX IF NOT EXISTS " + pgx.Identifier{o.table + indexSuffix}.Sanitize() +
		" ON " + qualified(o.schema, o.table) + " (expires_at)"
}

// Migrate creates the Store's schema (when WithSchema named one), table and
// index unless they exist, in one transaction that holds an advisory lock,
// so it is idempotent and safe when several processes run it at once.
// Those who manage their schema with a migration tool can use Schema instead.
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
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	return nil
}
