package mysql

import "strings"

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

type stmtID int

const (
	// stmtInsert inserts a new key in progress; a duplicate-key error
	// (1062) says the key has a row. Args: key, fingerprint, token, lease.
	stmtInsert stmtID = iota
	// stmtRead returns the row whatever its expiry, and the server's now.
	// Args: key.
	stmtRead
	// stmtReadLocking is stmtRead as a locking read, for use inside a
	// transaction: it sees the latest committed row even at REPEATABLE READ.
	stmtReadLocking
	// stmtTakeover claims a row whose lease or retention is over, naming the
	// token it expects there. Args: fingerprint, token, lease, key, old token.
	stmtTakeover
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
	// stmtRelease deletes a record in progress held by the token. Args: key, token.
	stmtRelease
	// stmtGet returns a live row. Args: key.
	stmtGet
	// stmtPurge deletes up to n rows past their expiry. Args: n.
	stmtPurge
	numStmts
)

func buildStatements(table string) [numStmts]string {
	r := strings.NewReplacer("{t}", table, "{now}", nowUS, "{exp}", expUS, "{until}", untilArg, "{plus}", plusArg)
	var q [numStmts]string
	q[stmtInsert] = r.Replace("INSERT INTO {t} (`key`, fingerprint, token, status, expires_at) VALUES (?, ?, ?, 1, {until})")
	q[stmtRead] = r.Replace("SELECT fingerprint, token, status, response, {exp}, {now} FROM {t} WHERE `key` = ?")
	q[stmtReadLocking] = q[stmtRead] + " LOCK IN SHARE MODE"
	q[stmtTakeover] = r.Replace("UPDATE {t} SET fingerprint = ?, token = ?, status = 1, response = NULL, expires_at = {until}\n" +
		"WHERE `key` = ? AND token = ? AND expires_at <= UTC_TIMESTAMP(6)")
	q[stmtRenew] = r.Replace("UPDATE {t} SET expires_at = {until}\n" +
		"WHERE `key` = ? AND token = ? AND status = 1 AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtComplete] = r.Replace("UPDATE {t} SET status = 2, response = ?, expires_at = {plus}\n" +
		"WHERE `key` = ? AND token = ? AND status = 1 AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtHeld] = r.Replace("SELECT status FROM {t} WHERE `key` = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtHeldLocking] = q[stmtHeld] + " LOCK IN SHARE MODE"
	q[stmtRelease] = r.Replace("DELETE FROM {t} WHERE `key` = ? AND token = ? AND status = 1")
	q[stmtGet] = r.Replace("SELECT fingerprint, token, status, response, {exp} FROM {t}\n" +
		"WHERE `key` = ? AND expires_at > UTC_TIMESTAMP(6)")
	q[stmtPurge] = r.Replace("DELETE FROM {t} WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at, `key` LIMIT ?")
	return q
}
