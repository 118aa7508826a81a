package spanner

import (
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// columns are the table's columns in the order the statements list them.
var columns = []string{"Key", "Fingerprint", "Token", "Status", "Response", "LockedUntil", "ExpiresAt", "Attempt", "Fence"}

// Values of the Status column.
const (
	statusInProgress = 1
	statusCompleted  = 2
)

// purgeCond is what Purge deletes, by the server's clock: a completed
// record whose retention is over, and a lease that lapsed store.LapsedKept
// (a day) ago or more.
var purgeCond = "((Status = 2 AND ExpiresAt <= CURRENT_TIMESTAMP()) OR " +
	"(Status = 1 AND ExpiresAt <= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL " +
	strconv.FormatInt(int64(store.LapsedKept/time.Second), 10) + " SECOND)))"

// statements are the SQL texts of one Store, built once for its table.
type statements struct {
	read       string // the server's time and the key's row, if any
	insert     string // DML, in InTx
	update     string // DML, in InTx
	delete     string // DML, in InTx
	purgeFind  string // keys past their deadline, read-only
	purgeDel   string // delete those still past it
	purgeBatch int
}

func newStatements(table string, purgeBatch int) statements {
	t := "`" + table + "`"
	set := make([]string, 0, len(columns)-1)
	for _, c := range columns[1:] {
		set = append(set, c+" = @"+c)
	}
	return statements{
		// One statement, one round trip: CURRENT_TIMESTAMP() is the
		// server's clock at the moment it reads the row, the only clock
		// every decision and deadline uses.
		// The outer join makes it one row whether the key exists or
		// not (a STRUCT or ARRAY would stop at 1 MiB, less than a
		// response may hold).
		read: "SELECT CURRENT_TIMESTAMP(), r.Fingerprint, r.Token, r.Status, r.Response, r.LockedUntil, r.ExpiresAt, r.Attempt, r.Fence FROM UNNEST([1]) AS one LEFT JOIN " +
			t + " AS r ON r.Key = @Key",
		insert:     "INSERT INTO " + t + " (" + strings.Join(columns, ", ") + ") VALUES (@" + strings.Join(columns, ", @") + ")",
		update:     "UPDATE " + t + " SET " + strings.Join(set, ", ") + " WHERE Key = @Key",
		delete:     "DELETE FROM " + t + " WHERE Key = @Key",
		purgeFind:  "SELECT Key FROM " + t + " WHERE " + purgeCond + " LIMIT @Limit",
		purgeDel:   "DELETE FROM " + t + " WHERE Key IN UNNEST(@Keys) AND " + purgeCond,
		purgeBatch: purgeBatch,
	}
}
