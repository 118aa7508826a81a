package spanner

import (
	"context"
	"fmt"
	"strings"

	sp "cloud.google.com/go/spanner"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
)

// Schema returns the DDL that creates the table named table (which must be
// valid for WithTable), one statement per element, for migration tools:
//
//	CREATE TABLE IF NOT EXISTS `idempotency_keys` (
//		Key STRING(MAX) NOT NULL,
//		Fingerprint STRING(MAX) NOT NULL,
//		Token STRING(MAX) NOT NULL,
//		Status INT64 NOT NULL,
//		Response BYTES(MAX),
//		LockedUntil TIMESTAMP,
//		ExpiresAt TIMESTAMP NOT NULL,
//		Attempt INT64 DEFAULT (0),
//		Fence INT64 DEFAULT (0),
//	) PRIMARY KEY (Key), ROW DELETION POLICY (OLDER_THAN(ExpiresAt, INTERVAL 1 DAY))
//
// The row deletion policy lets Spanner delete records a day after their
// ExpiresAt by itself, in the background (Spanner documents that this
// happens within about three days); until then an expired row is absent to
// every call, since they all compare ExpiresAt with the server's time. The
// day is store.LapsedKept: a lease that lapsed is kept that long for the
// attempt count of the claim that takes it over (a completed record whose
// retention ended is kept as long, absent, unless Purge deletes it first).
// There is no index on ExpiresAt: an index on an ever-growing timestamp
// sends every write to one split, the hot spot Spanner's documentation
// warns against, and the deletion policy needs none.
//
// A table made before Attempt and Fence (with the policy's INTERVAL 0 DAY)
// is upgraded by Migrate in place, with the statements Upgrades lists.
func Schema(table string) []string {
	return []string{"CREATE TABLE IF NOT EXISTS `" + table + "` (\n" +
		"\tKey STRING(MAX) NOT NULL,\n" +
		"\tFingerprint STRING(MAX) NOT NULL,\n" +
		"\tToken STRING(MAX) NOT NULL,\n" +
		"\tStatus INT64 NOT NULL,\n" +
		"\tResponse BYTES(MAX),\n" +
		"\tLockedUntil TIMESTAMP,\n" +
		"\tExpiresAt TIMESTAMP NOT NULL,\n" +
		"\tAttempt INT64 DEFAULT (0),\n" +
		"\tFence INT64 DEFAULT (0),\n" +
		") PRIMARY KEY (Key), ROW DELETION POLICY (" + deletionPolicy + ")"}
}

// deletionPolicy is the row deletion policy of the table: a day
// (store.LapsedKept) after ExpiresAt.
const deletionPolicy = "OLDER_THAN(ExpiresAt, INTERVAL 1 DAY)"

// oldDeletionPolicy is the policy of tables made before store.LapsedKept.
const oldDeletionPolicy = "OLDER_THAN(ExpiresAt, INTERVAL 0 DAY)"

// Upgrades returns the DDL that brings a table made by an earlier Schema
// up to date: the Attempt and Fence columns, with the default 0 that rows
// written before them take (read as Attempt 0, Fence 0), and the row
// deletion policy that keeps a lapsed lease store.LapsedKept:
//
//	ALTER TABLE `idempotency_keys` ADD COLUMN Attempt INT64 DEFAULT (0)
//	ALTER TABLE `idempotency_keys` ADD COLUMN Fence INT64 DEFAULT (0)
//	ALTER TABLE `idempotency_keys` REPLACE ROW DELETION POLICY (OLDER_THAN(ExpiresAt, INTERVAL 1 DAY))
//
// Run them once, before this version of the Store writes to the table (its
// writes name the new columns); Migrate runs those a table still needs.
// The last one is only for a table that has the earlier policy.
func Upgrades(table string) []string {
	t := "ALTER TABLE `" + table + "` "
	return []string{
		t + "ADD COLUMN Attempt INT64 DEFAULT (0)",
		t + "ADD COLUMN Fence INT64 DEFAULT (0)",
		t + "REPLACE ROW DELETION POLICY (" + deletionPolicy + ")",
	}
}

// Schema returns the DDL of the Store's table; see the package function.
func (s *Store) Schema() []string { return Schema(s.table) }

// Migrate creates the Store's table unless it exists, or upgrades a table
// made by an earlier version in place (the statements of Upgrades that it
// still needs, found in INFORMATION_SCHEMA), through a database admin
// client on the Store's database (made with the default credentials, or
// against SPANNER_EMULATOR_HOST when that is set), and waits for the schema
// changes to finish. Running it again, or from several processes at once,
// is harmless: a change another process made first is not made again.
func (s *Store) Migrate(ctx context.Context) error {
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	defer admin.Close()
	leave, err := s.enter(ctx)
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	defer leave()
	if err := s.ddl(ctx, admin, s.Schema()); err != nil {
		return wrap(ctx, "migrate", fmt.Errorf("table %s: %w", s.table, err))
	}
	for range 3 {
		todo, err := s.upgrades(ctx)
		if err != nil || len(todo) == 0 {
			return wrapNil(ctx, "migrate", err)
		}
		// Another process may be making the same change: its failure
		// here is checked against the schema again.
		if err = s.ddl(ctx, admin, todo); err == nil {
			return nil
		}
		if left, lerr := s.upgrades(ctx); lerr == nil && len(left) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return wrap(ctx, "migrate", fmt.Errorf("upgrading table %s: %w", s.table, err))
		}
	}
	return wrap(ctx, "migrate", fmt.Errorf("upgrading table %s: the schema kept changing", s.table))
}

// wrapNil is wrap for an error that may be nil.
func wrapNil(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	return wrap(ctx, op, err)
}

// ddl runs statements as one schema change and waits for it.
func (s *Store) ddl(ctx context.Context, admin *database.DatabaseAdminClient, statements []string) error {
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   s.client.DatabaseName(),
		Statements: statements,
	})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

// upgrades returns the statements of Upgrades the table still needs, as
// INFORMATION_SCHEMA tells.
func (s *Store) upgrades(ctx context.Context) ([]string, error) {
	ro := s.client.Single()
	defer ro.Close()
	have := map[string]bool{}
	err := ro.Query(ctx, sp.Statement{
		SQL:    "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @Table",
		Params: map[string]any{"Table": s.table},
	}).Do(func(r *sp.Row) error {
		var c string
		if err := r.Column(0, &c); err != nil {
			return err
		}
		have[c] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", s.table, err)
	}
	var policy sp.NullString
	ro2 := s.client.Single()
	defer ro2.Close()
	err = ro2.Query(ctx, sp.Statement{
		SQL:    "SELECT ROW_DELETION_POLICY_EXPRESSION FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @Table",
		Params: map[string]any{"Table": s.table},
	}).Do(func(r *sp.Row) error { return r.Column(0, &policy) })
	if err != nil {
		return nil, fmt.Errorf("reading the row deletion policy of %s: %w", s.table, err)
	}
	all := Upgrades(s.table)
	var todo []string
	if !have["Attempt"] {
		todo = append(todo, all[0])
	}
	if !have["Fence"] {
		todo = append(todo, all[1])
	}
	if policy.Valid && normalizePolicy(policy.StringVal) == normalizePolicy(oldDeletionPolicy) {
		todo = append(todo, all[2])
	}
	return todo, nil
}

// normalizePolicy makes two spellings of a policy expression compare equal.
func normalizePolicy(p string) string {
	return strings.ToUpper(strings.Join(strings.Fields(p), ""))
}
