package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// TestPragmaChecked: an unknown pragma, a value the pragma does not take,
// and a pragma SQLite does not report back after opening are all
// ErrInvalid, and Open leaves nothing open.
func TestPragmaChecked(t *testing.T) {
	for _, p := range []string{"nonsense", "synchronous(FUL)", "synchronous", "busy_timeout(-1)", "mmap_size(x)", "fsync(1)", "journal_mode(WALL)", "foreign_keys(maybe)", "synchronous(FULL); DROP TABLE x"} {
		_, err := sqlite.Open(filepath.Join(t.TempDir(), "p.db"), sqlite.WithPragma(p))
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("WithPragma(%q): %v, want ErrInvalid", p, err)
		}
	}
	// Accepted by the option, but not what SQLite then reports.
	for name, open := range map[string]func() (*sqlite.Store, error){
		"WAL on :memory:": func() (*sqlite.Store, error) {
			return sqlite.Open(":memory:", sqlite.WithPragma("journal_mode(WAL)"))
		},
		"mmap_size above the build's limit": func() (*sqlite.Store, error) {
			return sqlite.Open(filepath.Join(t.TempDir(), "m.db"), sqlite.WithPragma("mmap_size(1099511627776000)"))
		},
	} {
		s, err := open()
		if !errors.Is(err, store.ErrInvalid) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestPragmaReadBack: the pragmas given are what every connection reports.
func TestPragmaReadBack(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "p.db"),
		sqlite.WithPragma("synchronous(EXTRA)"), sqlite.WithPragma("foreign_keys=on"),
		sqlite.WithPragma("cache_size(-4000)"), sqlite.WithPragma("temp_store(MEMORY)"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for pragma, want := range map[string]string{"synchronous": "3", "foreign_keys": "1", "cache_size": "-4000", "temp_store": "2", "journal_mode": "wal"} {
		var got string
		if err := s.DB().QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}
