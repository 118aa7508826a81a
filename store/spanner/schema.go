package spanner

import (
	"context"
	"fmt"

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
//	) PRIMARY KEY (Key), ROW DELETION POLICY (OLDER_THAN(ExpiresAt, INTERVAL 0 DAY))
//
// The row deletion policy lets Spanner delete records whose ExpiresAt has
// passed by itself, in the background (Spanner documents that this happens
// within about three days); until then an expired row is absent to every
// call, since they all compare ExpiresAt with the server's time. There is
// no index on ExpiresAt: an index on an ever-growing timestamp sends every
// write to one split, the hot spot Spanner's documentation warns against,
// and the deletion policy needs none.
func Schema(table string) []string {
	return []string{"CREATE TABLE IF NOT EXISTS `" + table + "` (\n" +
		"\tKey STRING(MAX) NOT NULL,\n" +
		"\tFingerprint STRING(MAX) NOT NULL,\n" +
		"\tToken STRING(MAX) NOT NULL,\n" +
		"\tStatus INT64 NOT NULL,\n" +
		"\tResponse BYTES(MAX),\n" +
		"\tLockedUntil TIMESTAMP,\n" +
		"\tExpiresAt TIMESTAMP NOT NULL,\n" +
		") PRIMARY KEY (Key), ROW DELETION POLICY (OLDER_THAN(ExpiresAt, INTERVAL 0 DAY))"}
}

// Schema returns the DDL of the Store's table; see the package function.
func (s *Store) Schema() []string { return Schema(s.table) }

// Migrate creates the Store's table unless it exists, through a database
// admin client on the Store's database (made with the default credentials,
// or against SPANNER_EMULATOR_HOST when that is set), and waits for the
// schema change to finish. Running it again, or from several processes at
// once, is harmless.
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
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{
		Database:   s.client.DatabaseName(),
		Statements: s.Schema(),
	})
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	if err := op.Wait(ctx); err != nil {
		return wrap(ctx, "migrate", fmt.Errorf("table %s: %w", s.table, err))
	}
	return nil
}
