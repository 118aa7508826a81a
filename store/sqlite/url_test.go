package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/storesmoke"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "abs.db")
	t.Chdir(dir)
	for _, tc := range []struct{ url, file, table string }{
		{"sqlite://" + abs, abs, `"idempotency_keys"`},
		{"sqlite://rel.db?table=my_keys", filepath.Join(dir, "rel.db"), `"my_keys"`},
		{"sqlite:opaque.db?busy_timeout=2s&purge_batch=10&max_conns=2&pragma=synchronous(FULL)&pragma=foreign_keys(1)", filepath.Join(dir, "opaque.db"), `"idempotency_keys"`},
		{"sqlite://:memory:", "", `"idempotency_keys"`},
		{"sqlite::memory:", "", `"idempotency_keys"`},
	} {
		t.Run(tc.url, func(t *testing.T) {
			st, err := store.Open(t.Context(), tc.url)
			require.NoError(t, err)
			s, ok := st.(*sqlite.Store)
			require.True(t, ok, "%T", st)
			assert.Equal(t, tc.table, s.Table())
			require.NoError(t, store.Migrate(t.Context(), st))
			storesmoke.Run(t, st)
			if tc.file != "" {
				_, err := os.Stat(tc.file)
				require.NoError(t, err, "the URL's file was created")
			}
			require.NoError(t, store.Close(st))
			// The Store owned its database: it is closed now.
			require.Error(t, s.DB().Ping())
		})
	}
	// The URL's options reach the pool.
	st, err := store.Open(t.Context(), "sqlite://pool.db?max_conns=3&pragma=foreign_keys(1)")
	require.NoError(t, err)
	t.Cleanup(func() { store.Close(st) })
	db := st.(*sqlite.Store).DB()
	assert.Equal(t, 3, db.Stats().MaxOpenConnections)
	var fk int
	require.NoError(t, db.QueryRow("PRAGMA foreign_keys").Scan(&fk))
	assert.Equal(t, 1, fk)
}

func TestOpenURLRejects(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{
		"sqlite://",
		"sqlite://u:p@x.db",
		"sqlite://x.db?tabel=x",
		"sqlite://x.db?table=",
		"sqlite://x.db?busy_timeout=5",
		"sqlite://x.db?max_conns=0",
		"sqlite://x.db?purge_batch=lots",
	} {
		t.Run(u, func(t *testing.T) {
			s, err := store.Open(t.Context(), u)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			_, statErr := os.Stat("x.db")
			assert.True(t, errors.Is(statErr, os.ErrNotExist), "a rejected URL created its file")
		})
	}
}
