package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/idemkit/idemkit/store"
)

// Open opens the SQLite database at path with the driver modernc.org/sqlite
// (pure Go, no cgo), creating the file if it does not exist, and returns a
// Store that owns it: Close closes the database.
//
// path is a file name, ":memory:" for a private in-memory database (tests;
// it lives as long as the Store and has a single connection, so reads wait
// while an InTx is open), or a "file:" URI whose query parameters are kept
// (for example "file:x.db?mode=ro", which Open rejects as read-only).
//
// Every connection is set up with PRAGMA busy_timeout (WithBusyTimeout, 5s by
// default), journal_mode=WAL (readers never wait for the writer; a process
// crash loses no committed transaction), synchronous=NORMAL (a power loss may
// lose the last transactions; WithPragma("synchronous(FULL)") keeps them at a
// cost in speed) and BEGIN IMMEDIATE for write transactions, plus the pragmas
// given with WithPragma; foreign_keys is left as SQLite has it (off). The
// pool has 8 connections (WithMaxConns).
//
// Open checks that the file is a SQLite database it can write, and, if the
// table already exists, that it has the expected columns (or is of an
// earlier version that Migrate upgrades); it does not create or upgrade
// the table: call Migrate.
func Open(path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: open: %w: empty path", store.ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*o.busyTimeout+5*time.Second)
	defer cancel()
	return open(ctx, path, o)
}

// open is Open with a context for the checks it runs (store.Open passes its
// own).
func open(ctx context.Context, path string, o options) (*Store, error) {
	memory := isMemory(path)
	db, err := sql.Open("sqlite", dsn(path, memory, o))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if memory {
		// Every connection to ":memory:" is a database of its own.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
	} else {
		db.SetMaxOpenConns(o.maxConns)
		db.SetMaxIdleConns(o.maxConns)
	}
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := newStore(db, o)
	s.owned = true
	s.immediate = true
	if err := s.checkOpen(ctx, memory, !overrides(o.pragmas, "journal_mode"), o.pragmas); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

func isMemory(path string) bool {
	return path == ":memory:" || strings.HasPrefix(path, "file::memory:") ||
		(strings.HasPrefix(path, "file:") && strings.Contains(path, "mode=memory"))
}

// dsn builds modernc.org/sqlite's data source name for path.
func dsn(path string, memory bool, o options) string {
	base := path
	if !memory && !strings.HasPrefix(path, "file:") {
		// As a URI, so that a '?' or '#' in the file name is not a query.
		r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
		base = "file:" + r.Replace(path)
	}
	var pragmas []string
	for _, p := range []string{
		"busy_timeout(" + strconv.FormatInt(o.busyTimeout.Milliseconds(), 10) + ")",
		"journal_mode(WAL)",
		"synchronous(NORMAL)",
	} {
		if !overrides(o.pragmas, pragmaName(p)) {
			pragmas = append(pragmas, p)
		}
	}
	for _, p := range o.pragmas {
		pragmas = append(pragmas, p.String())
	}
	q := url.Values{"_pragma": pragmas, "_txlock": {"immediate"}}.Encode()
	if strings.Contains(base, "?") {
		return base + "&" + q
	}
	return base + "?" + q
}

// pragmaName returns the name of a pragma in "_pragma" form: "x(1)", "x=1".
func pragmaName(p string) string {
	p = strings.TrimSpace(p)
	if i := strings.IndexAny(p, "(= "); i >= 0 {
		p = p[:i]
	}
	return strings.ToLower(p)
}

// overrides reports whether the caller's pragmas set the pragma name.
func overrides(pragmas []pragma, name string) bool {
	for _, p := range pragmas {
		if p.name == name {
			return true
		}
	}
	return false
}

// checkOpen opens a connection (which runs the pragmas: a file that is not a
// database fails here) and checks that the database can be written to, is in
// WAL mode when wantWAL, and that an existing table has the right shape.
func (s *Store) checkOpen(ctx context.Context, memory, wantWAL bool, pragmas []pragma) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var readOnly bool
	err = conn.Raw(func(dc any) error {
		if c, ok := dc.(interface{ IsReadOnly(string) (bool, error) }); ok {
			ro, err := c.IsReadOnly("main")
			readOnly = ro
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if readOnly {
		return errors.New("the database is read-only (file permissions, a read-only file system, or mode=ro), and idemkit must write to it")
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if wantWAL && !memory && !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, could not switch to WAL", mode)
	}
	if err := checkPragmas(ctx, conn, pragmas, memory); err != nil {
		return err
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1`, s.table).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return nil // Migrate will create it
	}
	missing, err := verifyTable(ctx, conn, s.table)
	if err != nil {
		return err
	}
	if memory || len(missing) > 0 {
		// The only connection is conn, or the table is of an earlier
		// version that the statements do not fit yet: Migrate upgrades it
		// and prepares them.
		return nil
	}
	return s.prepareAll(ctx)
}
