package mysql

import (
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Record status values as stored in the status column.
const (
	statusInProgress = 1
	statusCompleted  = 2
)

// Time on the server: UTC_TIMESTAMP(6) does not depend on the session's
// time_zone, and it is fixed for the duration of a statement, so every
// comparison and every new expiry in one statement uses the same instant.
// Times travel as microseconds since the Unix epoch (BIGINT), so the driver's
// parseTime and loc settings do not matter either.
const (
	epoch = "'1970-01-01 00:00:00'"
	nowUS = "TIMESTAMPDIFF(MICROSECOND, " + epoch + ", UTC_TIMESTAMP(6))"
	// expUS reads the expires_at column as microseconds.
	expUS = "TIMESTAMPDIFF(MICROSECOND, " + epoch + ", expires_at)"
	// untilArg is now plus the statement's duration argument (microseconds),
	// as a DATETIME(6); LAST_INSERT_ID(x) returns x and makes the server send
	// x back as the OK packet's last insert id, so an INSERT or UPDATE
	// reports the expiry it wrote without a second round trip.
	untilArg = "DATE_ADD(" + epoch + ", INTERVAL LAST_INSERT_ID(" + nowUS + " + ?) MICROSECOND)"
	// plusArg is the same without reporting it.
	plusArg = "DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)"
)

// lapsedKeptUS is store.LapsedKept in microseconds: Purge keeps a lapsed
// lease that long after its end, for the attempt count of the claim that
// takes it over.
const lapsedKeptUS = int64(store.LapsedKept / time.Microsecond)

type stmtID int

const (
	// stmtInsert inserts a new key in progress, attempt 1 and fence the
	// server's now in microseconds (at least 1); a duplicate-key error
	// (1062) says the key has a row. Args: key, fingerprint, token, lease.
	stmtInsert stmtID = iota
	// stmtRead returns the row whatever its expiry, and the server's now.
	// Args: key.
	stmtRead
	// stmtReadLocking is stmtRead as a locking read, for use inside a
	// transaction: it sees the latest committed row even at REPEATABLE READ.
	stmtReadLocking
	// stmtTakeover claims a row whose lease or retention is over, naming
	// the token, status, attempt and fence it expects there, and sets the
	// attempt and fence as store.Successor says. Args: fingerprint, token,
	// lease, key, old token, old status, old attempt, old fence.
	stmtTakeover
	// stmtReclaim extends the caller's own live lease for a re-entrant
	// Claim, naming the attempt and fence it read, which it keeps. Args:
	// lease, key, token, attempt, fence.
	stmtReclaim
	// stmtRenew extends a live lease held by the token. Args: lease, key, token.
	stmtRenew
	// stmtComplete stores the response of a live record in progress held by
	// the token. Args: response, retention, key, token.
	stmtComplete
	// stmtHeld says whether the token holds or completed a live record.
	// Args: key, token.
	stmtHeld
	// stmtHeldLocking is stmtHeld as a locking read.
	stmtHeldLocking
	// stmtRelease deletes a live record in progress held by the token.
	// Args: key, token.
	stmtRelease
	// stmtGet returns a live row. Args: key.
	stmtGet
	// stmtPurge deletes up to n rows past their expiry: every completed
	// one, and the records in progress whose lease ended at least
	// store.LapsedKept ago. Args: n.
	stmtPurge
	numStmts
)

// The attempt and fence of a takeover, as store.Successor computes them:
// a lapsed lease (status 1) counts one attempt more, an expired completed
// record starts again at 1; the fence grows past the old one and is at
// least the server's now in microseconds. They are assigned before status
// in the UPDATE, so they read the old row whether the server assigns left
// to right (MySQL, MariaDB's default) or all at once (MariaDB's
// SIMULTANEOUS_ASSIGNMENT).
const (
	nextAttempt = "IF(status = 1, GREATEST(attempt, 1) + 1, 1)"
	nextFence   = "GREATEST(fence + 1, {now})"
)

func buildStatements(table string) [numStmts]string {
	r := strings.NewReplacer("{t}", table, "{now}", nowUS, "{exp}", expUS, "{until}", untilArg, "{plus}", plusArg,
		"{kept}", strconv.FormatInt(lapsedKeptUS, 10))
	var q [numStmts]string
	q[stmtInsert] = r.Replace("INSERT INTO {t} (`key`, fingerprint, token, status, expires_at, attempt, fence)\n" +
		"VALUES (?, ?, ?, 1, {until}, 1, GREATEST({now}, 1))")
	q[stmtRead] = r.Replace("SELECT fingerprint, token, status, response, {exp}, attempt, fence, {now} FROM {t} WHERE `key` = ?")
	q[stmtReadLocking] = q[stmtRead] + " LOCK IN SHARE MODE"
	q[stmtTakeover] = r.Replace("UPDATE {t} SET attempt = " + nextAttempt + ", fence = " + nextFence + ",\n" +
		"fingerprint = ?, token = ?, status = 1, response = NULL, expires_at = {until}\n" +
		"WHERE `key` = ? AND token = ? AND status = ? AND attempt = ? AND fence = ? AND expires_at <= UTC_TIMESTAMP(6)")
	q[stmtReclaim] = r.Replace("UPDATE {t} SET expires_at = {until}\n" +
		"WHERE `key` = ? AND token = ? AND status = 1 AND attempt = ? AND fence = ? AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtRenew] = r.Replace("UPDATE {t} SET expires_at = {plus}\n" +
		"WHERE `key` = ? AND token = ? AND status = 1 AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtComplete] = r.Replace("UPDATE {t} SET status = 2, response = ?, expires_at = {plus}\n" +
		"WHERE `key` = ? AND token = ? AND status = 1 AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtHeld] = r.Replace("SELECT status FROM {t} WHERE `key` = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtHeldLocking] = q[stmtHeld] + " LOCK IN SHARE MODE"
	q[stmtRelease] = r.Replace("DELETE FROM {t} WHERE `key` = ? AND token = ? AND status = 1 AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtGet] = r.Replace("SELECT fingerprint, token, status, response, {exp}, attempt, fence FROM {t}\n" +
		"WHERE `key` = ? AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtPurge] = r.Replace("DELETE FROM {t} WHERE expires_at <= UTC_TIMESTAMP(6)\n" +
		"AND (status <> 1 OR expires_at <= DATE_SUB(UTC_TIMESTAMP(6), INTERVAL {kept} MICROSECOND))\n" +
		"ORDER BY expires_at, `key` LIMIT ?")
	return q
}
