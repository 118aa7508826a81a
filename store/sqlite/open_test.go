package sqlite_test

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

func TestOpenBadPaths(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("not a database. ", 256)), 0o644))
	cases := []struct {
		name, path, want string
	}{
		{"empty path", "", "empty path"},
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "x.db"), "unable to open database file"},
		{"a directory", dir, "unable to open database file"},
		{"not a database", junk, "file is not a database"},
		{"read-only URI", "file:" + filepath.Join(dir, "ro.db") + "?mode=ro", ""},
	}
	// The read-only URI needs an existing database to open at all.
	ro := openPath(t, filepath.Join(dir, "ro.db"))
	require.NoError(t, ro.Close())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := sqlite.Open(c.path)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.True(t, strings.HasPrefix(err.Error(), "sqlite: open"), "error %q should say where it comes from", err)
			assert.Contains(t, err.Error(), c.want)
			if c.name == "read-only URI" {
				assert.Contains(t, err.Error(), "read-only")
			}
		})
	}
}

// A file the process may not write to: mode 0444, or, for root, who may
// write to any file, the immutable attribute (chattr +i).
func TestOpenReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.db")
	require.NoError(t, openPath(t, path).Close())
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("running as root and chattr +i failed (%v: %s); TestOpenBadPaths/read-only_URI covers read-only databases", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	} else {
		require.NoError(t, os.Chmod(path, 0o444))
	}
	_, err := sqlite.Open(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read-only")
}

func TestWrongSchema(t *testing.T) {
	tables := []struct {
		name, ddl, want string
	}{
		{"missing columns", `CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, value TEXT)`, `has no column "fingerprint"`},
		{"wrong type", `CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, fingerprint TEXT, token TEXT, status TEXT,
			response BLOB, locked_until INTEGER, expires_at INTEGER)`, `column "status" has type "TEXT"`},
		{"new column of the wrong type", `CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, fingerprint TEXT, token TEXT, status INTEGER,
			response BLOB, locked_until INTEGER, expires_at INTEGER, attempt TEXT)`, `column "attempt" has type "TEXT"`},
		{"key not the primary key", `CREATE TABLE idempotency_keys (key TEXT, fingerprint TEXT, token TEXT, status INTEGER,
			response BLOB, locked_until INTEGER, expires_at INTEGER)`, `"key" is not its primary key`},
		{"composite primary key", `CREATE TABLE idempotency_keys (key TEXT, fingerprint TEXT, token TEXT, status INTEGER,
			response BLOB, locked_until INTEGER, expires_at INTEGER, PRIMARY KEY (key, token))`, `more columns than "key"`},
	}
	for _, tc := range tables {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.db")
			db, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			_, err = db.Exec(tc.ddl)
			require.NoError(t, err)
			require.NoError(t, db.Close())

			// Open notices an existing table of the wrong shape.
			_, err = sqlite.Open(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)

			// So does Migrate, for a Store made with New.
			db, err = sql.Open("sqlite", path)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := sqlite.New(db)
			require.NoError(t, err)
			err = s.Migrate(t.Context())
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "sqlite: migrate: "), "error %q", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Calls before Migrate fail with the driver's error, not a panic, and never
// with a sentinel.
func TestNoTable(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	_, err = s.Claim(ctx, "k", "fp", store.NewToken(), 1e9)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such table")
	assert.NotErrorIs(t, err, store.ErrNotFound)
	_, err = s.Get(ctx, "k")
	assert.NotErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.Migrate(ctx))
	_, err = s.Claim(ctx, "k", "fp", store.NewToken(), 1e9)
	assert.NoError(t, err, "works once the table exists")
}

func TestBadOptions(t *testing.T) {
	_, err := sqlite.New(nil)
	assert.ErrorContains(t, err, "nil *sql.DB")
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = sqlite.New(db, sqlite.WithTable(""))
	assert.ErrorContains(t, err, "empty table name")
	_, err = sqlite.New(db, sqlite.WithTable("a\x00b"))
	assert.ErrorContains(t, err, "NUL")
	_, err = sqlite.Open(":memory:", sqlite.WithTable(""))
	assert.ErrorContains(t, err, "empty table name")
}

func TestSchemaQuotesTheTable(t *testing.T) {
	ddl, err := sqlite.Schema()
	require.NoError(t, err)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "idempotency_keys"`)
	ddl, err = sqlite.Schema(sqlite.WithTable(`a"b`))
	require.NoError(t, err)
	assert.Contains(t, ddl, `"a""b"`)
	assert.Contains(t, ddl, `"a""b_expires_at_idx"`)
	_, err = sqlite.Schema(sqlite.WithTable(""))
	require.ErrorIs(t, err, store.ErrInvalid)
	// The schema is valid SQL a migration tool can run as it is.
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ddl, err = sqlite.Schema(sqlite.WithTable(`weird "name"; --`))
	require.NoError(t, err)
	_, err = db.Exec(ddl)
	require.NoError(t, err)
	s, err := sqlite.New(db, sqlite.WithTable(`weird "name"; --`))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()), "Migrate accepts the table Schema made")
}

func TestCloseTwice(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	_, err = s.Claim(t.Context(), "k", "fp", store.NewToken(), 1e9)
	require.NoError(t, err)
	assert.NoError(t, s.Close())
	assert.NoError(t, s.Close())
	_, err = s.Claim(t.Context(), "k2", "fp", store.NewToken(), 1e9)
	assert.Error(t, err, "a closed Store fails, without panicking")
}

func TestPragmaOverride(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "p.db"), sqlite.WithPragma("synchronous(FULL)"), sqlite.WithPragma("foreign_keys(1)"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	var sync, fk int
	require.NoError(t, s.DB().QueryRow("PRAGMA synchronous").Scan(&sync))
	require.NoError(t, s.DB().QueryRow("PRAGMA foreign_keys").Scan(&fk))
	assert.Equal(t, 2, sync, "synchronous=FULL replaces Open's NORMAL")
	assert.Equal(t, 1, fk)

	d, err := sqlite.Open(filepath.Join(t.TempDir(), "d.db"))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	var mode string
	var busy int
	require.NoError(t, d.DB().QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.NoError(t, d.DB().QueryRow("PRAGMA synchronous").Scan(&sync))
	require.NoError(t, d.DB().QueryRow("PRAGMA foreign_keys").Scan(&fk))
	require.NoError(t, d.DB().QueryRow("PRAGMA busy_timeout").Scan(&busy))
	assert.Equal(t, "wal", mode)
	assert.Equal(t, 1, sync, "NORMAL")
	assert.Equal(t, 0, fk, "foreign keys left off")
	assert.Equal(t, 5000, busy)
}

// A file name with characters that mean something in a URI.
func TestOpenOddFileName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "odd?name#100%.db")
	s := openPath(t, path)
	_, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), 1e9)
	require.NoError(t, err)
	_, err = os.Stat(path)
	assert.NoError(t, err, "the database is the file named, not a truncated name")
}
