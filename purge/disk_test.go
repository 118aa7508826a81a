package purge_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/sqlite"
)

// sqliteFile opens a SQLite store in a fresh file with the test clock.
func sqliteFile(t *testing.T, clk *clock, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, err := sqlite.Open(path, append([]sqlite.Option{sqlite.WithClock(clk.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, path
}

func pragma(t *testing.T, s *sqlite.Store, name string) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRow("PRAGMA " + name).Scan(&n); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return n
}

func rows(t *testing.T, s *sqlite.Store) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRow("SELECT count(*) FROM " + s.Table()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fileSize checkpoints the WAL into the database file and returns the
// file's size on disk.
func fileSize(t *testing.T, s *sqlite.Store, path string) int64 {
	t.Helper()
	if _, err := s.DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

const (
	expiring = 200
	live     = 20
)

var body = []byte(strings.Repeat("r", 6000))

// TestSQLiteRecordsLeaveTheDisk: after the job's run the expired rows are
// gone from the table itself (counted with SQL, not through Get), their pages
// are free in the file, and VACUUM gives them back to the file system.
func TestSQLiteRecordsLeaveTheDisk(t *testing.T) {
	clk := newClock()
	s, path := sqliteFile(t, clk)
	fill(t, s, "old", expiring, time.Minute, body)
	fill(t, s, "live", live, 24*time.Hour, body)
	clk.Advance(2 * time.Minute)

	before := fileSize(t, s, path)
	if n := rows(t, s); n != expiring+live {
		t.Fatalf("%d rows before the purge, want %d", n, expiring+live)
	}
	if f := pragma(t, s, "freelist_count"); f != 0 {
		t.Fatalf("freelist_count %d before the purge", f)
	}

	obs, ch := results()
	j, err := purge.New(s, purge.WithInterval(time.Hour), obs, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, j)
	if r := receive(t, ch); r.Err != nil || r.Deleted != expiring {
		t.Fatalf("run: deleted %d, err %v; want %d", r.Deleted, r.Err, expiring)
	}
	if n := rows(t, s); n != live {
		t.Fatalf("%d rows after the purge, want %d", n, live)
	}
	// The deleted rows' pages are free: about 200 × 6 KB = 1.2 MB of a
	// file of 4 KB pages.
	pageSize := pragma(t, s, "page_size")
	free := pragma(t, s, "freelist_count") * pageSize
	if free < expiring*int64(len(body))/2 {
		t.Fatalf("only %d bytes free after deleting %d records of %d bytes", free, expiring, len(body))
	}
	if _, err := s.DB().Exec("VACUUM"); err != nil {
		t.Fatal(err)
	}
	after := fileSize(t, s, path)
	t.Logf("file %d bytes before, %d free after the purge, %d after VACUUM", before, free, after)
	if after > before/4 {
		t.Fatalf("file is %d bytes after purge and VACUUM, was %d: the space did not leave the disk", after, before)
	}
}

// TestSQLiteAutoVacuumShrinksWithoutVacuum: with PRAGMA auto_vacuum=FULL
// (set before the table is created) the purge itself gives the pages back.
func TestSQLiteAutoVacuumShrinksWithoutVacuum(t *testing.T) {
	clk := newClock()
	s, path := sqliteFile(t, clk, sqlite.WithPragma("auto_vacuum(FULL)"))
	if m := pragma(t, s, "auto_vacuum"); m != 1 {
		t.Fatalf("auto_vacuum = %d, want 1 (FULL)", m)
	}
	fill(t, s, "old", expiring, time.Minute, body)
	fill(t, s, "live", live, 24*time.Hour, body)
	clk.Advance(2 * time.Minute)
	before := fileSize(t, s, path)

	j, err := purge.New(s, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if r := j.Once(context.Background()); r.Err != nil || r.Deleted != expiring {
		t.Fatalf("run: deleted %d, err %v", r.Deleted, r.Err)
	}
	after := fileSize(t, s, path)
	t.Logf("file %d bytes before, %d after the purge", before, after)
	if n := rows(t, s); n != live {
		t.Fatalf("%d rows after the purge, want %d", n, live)
	}
	if after > before/4 {
		t.Fatalf("file is %d bytes after the purge, was %d", after, before)
	}
}

// TestPostgresRecordsLeaveTheTable: PostgreSQL keeps time by the server's
// clock, so the expiring records get a 1 ms retention and the test waits for
// it to pass (the real clock is the subject here).
func TestPostgresRecordsLeaveTheTable(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	table := fmt.Sprintf("purge_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	s, err := postgres.New(pool, postgres.WithTable(table), postgres.WithPurgeBatch(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`) })

	fill(t, s, "old", 250, time.Millisecond, body)
	fill(t, s, "live", live, time.Hour, body)
	count := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 250+live {
		t.Fatalf("%d rows before the purge, want %d", n, 250+live)
	}
	time.Sleep(20 * time.Millisecond) // past the 1 ms retention, by the server's clock too

	obs, ch := results()
	j, err := purge.New(s, purge.WithInterval(time.Hour), obs, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, j)
	if r := receive(t, ch); r.Err != nil || r.Deleted != 250 {
		t.Fatalf("run: deleted %d, err %v; want 250", r.Deleted, r.Err)
	}
	if n := count(); n != live {
		t.Fatalf("%d rows after the purge, want %d", n, live)
	}
	var _ store.Purger = s
}
