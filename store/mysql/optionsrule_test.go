package mysql_test

import (
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store/mysql"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connects: New does no I/O
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for name, opts := range map[string][]mysql.Option{
		"nil": {nil}, "empty table": {mysql.WithTable("")}, "trailing space": {mysql.WithTable("t ")}, "purge batch 0": {mysql.WithPurgeBatch(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := mysql.New(db, opts...)
			secrettest.CheckInvalid(t, "mysql", err)
		})
	}
}
