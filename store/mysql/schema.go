package mysql

import (
	"context"
	"fmt"
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
//		PRIMARY KEY (`key`),
//		KEY `idempotency_keys_expires_at_idx` (expires_at)
//	) ENGINE=InnoDB ROW_FORMAT=DYNAMIC;
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
	PRIMARY KEY (` + "`key`" + `),
	KEY ` + quoteIdent(o.table+indexSuffix) + ` (expires_at)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC`
}

// Migrate creates the Store's table with its index unless it exists. It is
// one CREATE TABLE IF NOT EXISTS, which the server's metadata lock makes
// safe when several processes run it at once; it is idempotent. Those who
// manage their schema with a migration tool can use Schema instead.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, createTableSQL(s.opts)); err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	return nil
}
