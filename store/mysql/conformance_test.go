package mysql

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/storetest"
)

// TestConformance runs the full storetest suite, each subtest on its own
// table, on the server's clock, with the driver's default DSN flags and the
// server's default isolation level (REPEATABLE READ).
func TestConformance(t *testing.T) {
	db := testDB(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return withEffects(t, db, storetest.Subject{Store: newTestStore(t, db)})
		},
	})
}

// TestConformanceFlags runs the suite on a pool whose DSN changes what
// could trip a MySQL backend: clientFoundRows (affected rows count matched,
// not changed, rows), READ COMMITTED, a session time_zone far from UTC,
// parseTime with a non-UTC loc, interpolateParams, and a non-strict
// sql_mode with ANSI_QUOTES (and SIMULTANEOUS_ASSIGNMENT on MariaDB).
func TestConformanceFlags(t *testing.T) {
	mariaDB := isMariaDB(t)
	db := openDB(t, 16, func(c *dsnConfig) {
		c.ClientFoundRows = true
		c.InterpolateParams = true
		c.ParseTime = true
		if loc, err := time.LoadLocation("America/Denver"); err == nil {
			c.Loc = loc // a name FormatDSN can write
		}
		withIsolation(t, "READ-COMMITTED")(c)
		c.Params["time_zone"] = "'+05:30'"
		// Not strict (a too-long value would be truncated with a warning,
		// not refused) and "..." quoting identifiers; on MariaDB, an
		// UPDATE's assignments all reading the old row.
		c.Params["sql_mode"] = "'ANSI_QUOTES'"
		if mariaDB {
			c.Params["sql_mode"] = "'ANSI_QUOTES,SIMULTANEOUS_ASSIGNMENT'"
		}
	})
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return withEffects(t, db, storetest.Subject{Store: newTestStore(t, db)})
		},
	})
}
