package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db
}

func rows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rs, err := db.Query("SELECT v FROM t ORDER BY v")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func insert(ctx context.Context, tx *sql.Tx, v string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (?)", v)
	return err
}

func TestRun(t *testing.T) {
	ctx := t.Context()
	db := testDB(t)
	boom := errors.New("boom")
	if err := Run(ctx, db, "x", Hooks{}, func(tx *sql.Tx) error { return insert(ctx, tx, "a") }); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, db, "x", Hooks{}, func(tx *sql.Tx) error { insert(ctx, tx, "b"); return boom }); err != boom {
		t.Errorf("fn's error comes back as it is: %v", err)
	}
	if err := Run(ctx, db, "x", Hooks{Verify: func() error { return boom }}, func(tx *sql.Tx) error { return insert(ctx, tx, "c") }); err != boom {
		t.Errorf("Verify's error: %v", err)
	}
	if err := Run(ctx, db, "x", Hooks{Start: func(*sql.Tx) error { return boom }}, func(tx *sql.Tx) error { return insert(ctx, tx, "d") }); !errors.Is(err, boom) || err.Error() != "x: begin: boom" {
		t.Errorf("Start's error: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		Run(ctx, db, "x", Hooks{}, func(tx *sql.Tx) error { insert(ctx, tx, "e"); panic("fn") })
	}()
	err := Run(ctx, db, "x", Hooks{}, func(tx *sql.Tx) error {
		insert(ctx, tx, "f")
		if err := Savepoint(ctx, tx, "x", nil, func() error { insert(ctx, tx, "g"); return boom }); err != boom {
			t.Errorf("Savepoint: %v", err)
		}
		return Savepoint(ctx, tx, "x", nil, func() error { return insert(ctx, tx, "h") })
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db); len(got) != 3 || got[0] != "a" || got[1] != "f" || got[2] != "h" {
		t.Errorf("rows %v, want [a f h]: only what committed, without the rolled-back savepoint", got)
	}
}
