package sqlite_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// An invalid option is an error at construction, from Open, New and Schema
// alike, and never silently replaced by a default.
func TestInvalidOptions(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for name, opt := range map[string]sqlite.Option{
		"nil clock":         sqlite.WithClock(nil),
		"zero busy timeout": sqlite.WithBusyTimeout(0),
		"negative busy":     sqlite.WithBusyTimeout(-time.Second),
		"zero purge batch":  sqlite.WithPurgeBatch(0),
		"zero max conns":    sqlite.WithMaxConns(0),
		"empty pragma":      sqlite.WithPragma(" "),
		"empty table":       sqlite.WithTable(""),
		"table too long":    sqlite.WithTable(strings.Repeat("t", sqlite.MaxTableLen+1)),
		"table not UTF-8":   sqlite.WithTable("a\xffb"),
		"table with NUL":    sqlite.WithTable("a\x00b"),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := sqlite.Open(":memory:", opt)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			assert.True(t, strings.HasPrefix(err.Error(), "sqlite: open "), err.Error())
			s, err = sqlite.New(db, opt)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			_, err = sqlite.Schema(opt)
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
}

// New cannot apply the options that configure the connections Open makes:
// it says so instead of ignoring them.
func TestNewRejectsOpenOnlyOptions(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = sqlite.New(db, sqlite.WithPragma("synchronous(FULL)"))
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, "WithPragma applies only to Open")
	_, err = sqlite.New(db, sqlite.WithMaxConns(2), sqlite.WithPragma("foreign_keys(1)"))
	assert.ErrorContains(t, err, "WithMaxConns and WithPragma applies only to Open")
	_, err = sqlite.New(nil)
	require.ErrorIs(t, err, store.ErrInvalid)
}

// Open applies WithMaxConns and WithPragma to the pool it makes.
func TestOpenHonoursPoolOptions(t *testing.T) {
	path := t.TempDir() + "/keys.db"
	s, err := sqlite.Open(path, sqlite.WithMaxConns(3), sqlite.WithPragma("foreign_keys(1)"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	assert.Equal(t, 3, s.DB().Stats().MaxOpenConnections)
	var fk int
	require.NoError(t, s.DB().QueryRow("PRAGMA foreign_keys").Scan(&fk))
	assert.Equal(t, 1, fk)
}

// Table is quoted, as on PostgreSQL, and the default table is the same.
func TestTableQuotedDefault(t *testing.T) {
	s, err := sqlite.Open(":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	assert.Equal(t, `"idempotency_keys"`, s.Table())
	ddl, err := sqlite.Schema()
	require.NoError(t, err)
	assert.Equal(t, ddl, s.Schema())
}
