package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

// openFile opens a fresh, migrated store on a file in t's temporary directory.
func openFile(t *testing.T, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "idemkit.db"), opts...)
}

// openPath opens a migrated store on path, closed when t ends.
func openPath(t *testing.T, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the whole suite on a database file, as Open sets it up.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Now())
			s := openFile(t, sqlite.WithClock(clock.Now))
			return withEffects(t, s, storetest.Subject{Store: s, Clock: clock})
		},
	})
}

// TestConformanceMemory runs the suite on ":memory:" (one connection).
func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Now())
			s, err := sqlite.Open(":memory:", sqlite.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return withEffects(t, s, storetest.Subject{Store: s, Clock: clock})
		},
	})
}

// TestConformanceNew runs the suite through New on a caller's *sql.DB whose
// transactions begin DEFERRED (the driver's default), with a table name that
// needs quoting.
func TestConformanceNew(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			path := filepath.Join(t.TempDir(), "caller.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			clock := storetest.NewManualClock(time.Now())
			s, err := sqlite.New(db, sqlite.WithTable(`my "keys"; drop`), sqlite.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return withEffects(t, s, storetest.Subject{Store: s, Clock: clock})
		},
	})
}
