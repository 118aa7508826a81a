package spanner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sp "cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/grpc/codes"

	"github.com/idemkit/idemkit/storetest"
)

// The tests run against the Cloud Spanner emulator at SPANNER_EMULATOR_HOST
// (bash .ci/services/spanner.sh starts one). They create the instance
// testInstance when it is missing and one database of their own, dropped
// when they end; every store gets its own table in it.
const (
	testProject  = "idemkit-test"
	testInstance = "idemkit-test"
)

// emulatorHost returns SPANNER_EMULATOR_HOST, or skips the test when it is
// unset (fails under CI=true, where CI must never pass by skipping).
func emulatorHost(t testing.TB) string {
	t.Helper()
	v := os.Getenv("SPANNER_EMULATOR_HOST")
	switch {
	case v != "":
		return v
	case os.Getenv("CI") == "true":
		t.Fatal("SPANNER_EMULATOR_HOST is not set: CI=true requires the Cloud Spanner emulator (bash .ci/services/spanner.sh starts one)")
	default:
		t.Skip("SPANNER_EMULATOR_HOST is not set; skipping the tests that need the Cloud Spanner emulator")
	}
	return ""
}

// testDatabase is one database the tests create, with its client.
type testDatabase struct {
	once   sync.Once
	db     string // projects/P/instances/I/databases/D
	client *sp.Client
	err    error
}

// shared is the database of the package's tests; second is where a
// subtest's second store goes (storetest's "another store" cases), so that
// the two never share the emulator's one transaction per database.
var shared, second testDatabase

// TestMain runs the tests, then closes the shared client and drops the
// database they created.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []*testDatabase{&shared, &second} {
		if d.client == nil {
			continue
		}
		d.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := dropDatabase(ctx, d.db); err != nil {
			fmt.Fprintf(os.Stderr, "dropping %s: %v\n", d.db, err)
			code = 1
		}
		cancel()
	}
	os.Exit(code)
}

// testDB returns the database the package's tests share, and its client.
func testDB(t testing.TB) (string, *sp.Client) {
	t.Helper()
	return shared.get(t)
}

func (d *testDatabase) get(t testing.TB) (string, *sp.Client) {
	t.Helper()
	emulatorHost(t)
	d.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		d.db, d.err = createDatabase(ctx)
		if d.err == nil {
			d.client, d.err = sp.NewClient(ctx, d.db)
		}
	})
	if d.err != nil {
		t.Fatalf("the test database: %v", d.err)
	}
	return d.db, d.client
}

// uniqueName returns prefix followed by 12 random lower-case characters.
func uniqueName(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:12])
}

// createDatabase creates the test instance unless it exists, then a database
// with a unique name and the effects table, and returns the database's name.
func createDatabase(ctx context.Context) (string, error) {
	ia, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		return "", err
	}
	defer ia.Close()
	op, err := ia.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + testProject,
		InstanceId: testInstance,
		Instance: &instancepb.Instance{
			Config:      "projects/" + testProject + "/instanceConfigs/emulator-config",
			DisplayName: "idemkit tests",
			NodeCount:   1,
		},
	})
	switch {
	case sp.ErrCode(err) == codes.AlreadyExists:
	case err != nil:
		return "", fmt.Errorf("create instance: %w", err)
	default:
		if _, err := op.Wait(ctx); err != nil && sp.ErrCode(err) != codes.AlreadyExists {
			return "", fmt.Errorf("create instance: %w", err)
		}
	}
	da, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return "", err
	}
	defer da.Close()
	name := uniqueName("idemkit_")
	dop, err := da.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          "projects/" + testProject + "/instances/" + testInstance,
		CreateStatement: "CREATE DATABASE `" + name + "`",
		ExtraStatements: []string{effectsDDL},
	})
	if err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	if _, err := dop.Wait(ctx); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return "projects/" + testProject + "/instances/" + testInstance + "/databases/" + name, nil
}

func dropDatabase(ctx context.Context, db string) error {
	da, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return err
	}
	defer da.Close()
	return da.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: db})
}

// effectsDDL is the table of the Transactor cases' effects: one row per
// effect, named by the store's table and the key.
const effectsDDL = "CREATE TABLE Effects (Tbl STRING(MAX) NOT NULL, Key STRING(MAX) NOT NULL, Id STRING(MAX) NOT NULL) PRIMARY KEY (Tbl, Key, Id)"

// newTestStore returns a Store on the shared database with its own freshly
// migrated table.
func newTestStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	_, client := testDB(t)
	return newStoreOn(t, client, opts...)
}

// newStoreOn returns a Store on client with its own freshly migrated table.
func newStoreOn(t testing.TB, client *sp.Client, opts ...Option) *Store {
	t.Helper()
	s, err := New(client, append([]Option{WithTable(uniqueName("t_"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// subject returns s as a storetest subject whose effects are rows of the
// Effects table written through InTx's transaction.
func subject(s *Store) storetest.Subject {
	return storetest.Subject{
		Store: s,
		Effect: func(ctx context.Context, key string) error {
			tx, ok := TxFrom(ctx)
			if !ok {
				return errors.New("effect: the context carries no transaction")
			}
			return tx.BufferWrite([]*sp.Mutation{sp.Insert("Effects", []string{"Tbl", "Key", "Id"}, []any{s.table, key, rand.Text()})})
		},
		CountEffects: func(ctx context.Context, key string) (int, error) {
			return countEffects(ctx, s, key)
		},
	}
}

func countEffects(ctx context.Context, s *Store, key string) (int, error) {
	ro := s.client.Single()
	defer ro.Close()
	var n int64
	err := ro.Query(ctx, sp.Statement{
		SQL:    "SELECT COUNT(*) FROM Effects WHERE Tbl = @Tbl AND Key = @Key",
		Params: map[string]any{"Tbl": s.table, "Key": key},
	}).Do(func(r *sp.Row) error { return r.Column(0, &n) })
	return int(n), err
}
