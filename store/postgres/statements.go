package postgres

import "strings"

// Record status values as stored in the status column.
const (
	statusInProgress int16 = 1
	statusCompleted  int16 = 2
)

// statements holds the SQL of one Store, built once for its table.
type statements struct {
	// claim inserts a new key and returns its expiry; no row when the key
	// exists (committed before the statement, or by a concurrent claim it
	// waited for): read it with reread.
	// $1 key, $2 fingerprint, $3 token, $4 lease.
	claim string
	// reread returns the row whatever its expiry, and whether it is live.
	// $1 key.
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
	// claimMany inserts the new keys among many, in key order, and returns
	// each inserted key and its expiry. $1 keys (no duplicates),
	// $2 fingerprints, $3 tokens, $4 leases.
	claimMany string
	// completeMany is complete for many keys at once, returning each key it
	// matched. $1 keys (no duplicates), $2 tokens, $3 responses, $4 retentions.
	completeMany string
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
		claim: r.Replace(`INSERT INTO {t} AS t (key, fingerprint, token, status, expires_at)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval)
ON CONFLICT (key) DO NOTHING
RETURNING t.expires_at`),

		reread: r.Replace(`SELECT fingerprint, token, status, response, expires_at, expires_at > clock_timestamp() FROM {t} WHERE key = $1`),

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

		claimMany: r.Replace(`INSERT INTO {t} AS t (key, fingerprint, token, status, expires_at)
SELECT v.key, v.fingerprint, v.token, 1, clock_timestamp() + v.lease
FROM unnest($1::text[], $2::text[], $3::text[], $4::interval[]) AS v(key, fingerprint, token, lease)
ORDER BY v.key COLLATE "C"
ON CONFLICT (key) DO NOTHING
RETURNING t.key, t.expires_at`),

		completeMany: r.Replace(`UPDATE {t} AS t SET status = 2,
	response = CASE WHEN t.status = 1 THEN v.response ELSE t.response END,
	expires_at = CASE WHEN t.status = 1 THEN clock_timestamp() + v.retention ELSE t.expires_at END
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::interval[]) AS v(key, token, response, retention)
WHERE t.key = v.key AND t.token = v.token AND t.expires_at > clock_timestamp()
RETURNING t.key`),

		release: r.Replace(`DELETE FROM {t} WHERE key = $1 AND token = $2 AND status = 1`),

		get: r.Replace(`SELECT fingerprint, token, status, response, expires_at FROM {t}
WHERE key = $1 AND expires_at > clock_timestamp()`),

		purge: r.Replace(`DELETE FROM {t} WHERE key IN (
	SELECT key FROM {t} WHERE expires_at <= clock_timestamp()
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= clock_timestamp()`),
	}
}
