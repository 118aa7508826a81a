package postgres

import "strings"

// Record status values as stored in the status column.
const (
	statusInProgress int16 = 1
	statusCompleted  int16 = 2
)

// statements holds the SQL of one Store, built once for its table.
type statements struct {
	// claim inserts a new key, or returns the existing row when it was
	// committed before the statement's snapshot. No row: the conflicting
	// row was committed after it (or is gone again); read it with reread.
	// $1 key, $2 fingerprint, $3 token, $4 lease.
	claim string
	// reread returns the row whatever its expiry. $1 key.
	reread string
	// takeover claims a row whose lease or retention is over, naming the
	// token it expects there. $1 key, $2 fingerprint, $3 token, $4 lease,
	// $5 old token.
	takeover string
	// renew extends a live lease held by the token. $1 key, $2 token, $3 lease.
	renew string
	// complete stores the response of a live record held by the token, and
	// matches (changing nothing) one the token already completed: SET reads
	// the row as it was, so the first response and expiry stay. Two
	// concurrent Completes by one token: the second re-checks the row the
	// first committed and keeps it. $1 key, $2 token, $3 response, $4 retention.
	complete string
	// release deletes a record in progress held by the token. $1 key, $2 token.
	release string
	// get returns a live row. $1 key.
	get string
	// purge deletes up to $1 rows past their expiry.
	purge string
}

func buildStatements(table string) statements {
	r := strings.NewReplacer("{t}", table)
	return statements{
		claim: r.Replace(`WITH ins AS (
	INSERT INTO {t} AS t (key, fingerprint, token, status, expires_at)
	VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval)
	ON CONFLICT (key) DO NOTHING
	RETURNING t.fingerprint, t.token, t.status, t.response, t.expires_at
)
SELECT fingerprint, token, status, response, expires_at, true, clock_timestamp() FROM ins
UNION ALL
SELECT fingerprint, token, status, response, expires_at, false, clock_timestamp() FROM {t}
WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)`),

		reread: r.Replace(`SELECT fingerprint, token, status, response, expires_at, clock_timestamp() FROM {t} WHERE key = $1`),

		takeover: r.Replace(`UPDATE {t} SET fingerprint = $2, token = $3, status = 1, response = NULL,
	expires_at = clock_timestamp() + $4::interval
WHERE key = $1 AND token = $5 AND expires_at <= clock_timestamp()
RETURNING expires_at`),

		renew: r.Replace(`UPDATE {t} SET expires_at = clock_timestamp() + $3::interval
WHERE key = $1 AND token = $2 AND status = 1 AND expires_at > clock_timestamp()
RETURNING expires_at`),

		complete: r.Replace(`UPDATE {t} SET status = 2,
	response = CASE WHEN status = 1 THEN $3::bytea ELSE response END,
	expires_at = CASE WHEN status = 1 THEN clock_timestamp() + $4::interval ELSE expires_at END
WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		release: r.Replace(`DELETE FROM {t} WHERE key = $1 AND token = $2 AND status = 1`),

		get: r.Replace(`SELECT fingerprint, token, status, response, expires_at FROM {t}
WHERE key = $1 AND expires_at > clock_timestamp()`),

		purge: r.Replace(`DELETE FROM {t} WHERE key IN (
	SELECT key FROM {t} WHERE expires_at <= clock_timestamp()
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= clock_timestamp()`),
	}
}
