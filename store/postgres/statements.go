package postgres

import (
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// Record status values as stored in the status column.
const (
	statusInProgress int16 = 1
	statusCompleted  int16 = 2
)

// statements holds the SQL of one Store, built once for its table.
type statements struct {
	// claim inserts a new key, attempt 1 and fence the server's clock in
	// µs (store.Successor of no record), and returns its expiry and fence;
	// no row when the key exists (committed before the statement, or by a
	// concurrent claim it waited for): read it with reread.
	// $1 key, $2 fingerprint, $3 token, $4 lease.
	claim string
	// reread returns the row whatever its expiry, whether it is live, and
	// its attempt and fence. $1 key.
	reread string
	// takeover claims a row whose lease or retention is over, naming the
	// token it expects there, and sets its attempt and fence as
	// store.Successor does from the row it replaces, in the same statement:
	// a lapsed lease counts one attempt more, a completed record counts
	// from 1, and the fence grows past the old one and to at least the
	// server's clock in µs. Returns the expiry, attempt and fence.
	// $1 key, $2 fingerprint, $3 token, $4 lease, $5 old token.
	takeover string
	// renew extends a live lease held by the token, keeping its attempt and
	// fence, and returns the expiry, attempt and fence; no row when the
	// token holds no live lease on the key (absent, lapsed, completed,
	// another token's): it never creates or revives a record. Store.Renew
	// and a re-entrant Claim run it. $1 key, $2 token, $3 lease.
	renew string
	// complete stores the response of a live record held by the token, and
	// matches (changing nothing) one the token already completed: SET reads
	// the row as it was, so the first response and expiry stay. Two
	// concurrent Completes by one token: the second re-checks the row the
	// first committed and keeps it. $1 key, $2 token, $3 response, $4 retention.
	complete string
	// claimMany inserts the new keys among many, in key order, as claim
	// does, and returns each inserted key, its expiry and its fence. $1 keys (no duplicates),
	// $2 fingerprints, $3 tokens, $4 leases.
	claimMany string
	// completeMany is complete for many keys at once, returning each key it
	// matched. $1 keys (no duplicates), $2 tokens, $3 responses, $4 retentions.
	completeMany string
	// release deletes a live lease held by the token; a lapsed one stays,
	// for its attempt count. $1 key, $2 token.
	release string
	// get returns a live row with its attempt and fence. $1 key.
	get string
	// purge deletes up to $1 completed rows past their retention and rows
	// in progress whose lease lapsed store.LapsedKept ago or longer.
	purge string
}

// micros is the SQL of the server's clock n (a timestamptz) in whole
// microseconds since the Unix epoch, as store.Successor reads the clock.
func micros(n string) string { return "(extract(epoch FROM " + n + ") * 1000000)::bigint" }

// lapsedKept is store.LapsedKept as an SQL interval.
var lapsedKept = "interval '" + strconv.FormatInt(store.LapsedKept.Microseconds(), 10) + " microseconds'"

func buildStatements(table string) statements {
	// Each claim statement reads the server's clock once, as c.n, and
	// decides liveness, the lease's end and the fence from that instant.
	r := strings.NewReplacer("{t}", table, "{us}", micros("c.n"), "{kept}", lapsedKept)
	return statements{
		claim: r.Replace(`INSERT INTO {t} AS t (key, fingerprint, token, status, expires_at, attempt, fence)
SELECT $1::text, $2::text, $3::text, 1, c.n + $4::interval, 1, greatest(1, {us})
FROM (SELECT clock_timestamp() AS n) AS c
ON CONFLICT (key) DO NOTHING
RETURNING t.expires_at, t.fence`),

		reread: r.Replace(`SELECT fingerprint, token, status, response, expires_at, expires_at > clock_timestamp(), attempt, fence FROM {t} WHERE key = $1`),

		takeover: r.Replace(`UPDATE {t} AS t SET fingerprint = $2, token = $3, status = 1, response = NULL,
	expires_at = c.n + $4::interval,
	attempt = CASE WHEN t.status = 1 THEN greatest(t.attempt, 1) + 1 ELSE 1 END,
	fence = greatest(t.fence + 1, {us})
FROM (SELECT clock_timestamp() AS n) AS c
WHERE t.key = $1 AND t.token = $5 AND t.expires_at <= c.n
RETURNING t.expires_at, t.attempt, t.fence`),

		renew: r.Replace(`UPDATE {t} SET expires_at = clock_timestamp() + $3::interval
WHERE key = $1 AND token = $2 AND status = 1 AND expires_at > clock_timestamp()
RETURNING expires_at, attempt, fence`),

		complete: r.Replace(`UPDATE {t} SET status = 2,
	response = CASE WHEN status = 1 THEN $3::bytea ELSE response END,
	expires_at = CASE WHEN status = 1 THEN clock_timestamp() + $4::interval ELSE expires_at END
WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		claimMany: r.Replace(`INSERT INTO {t} AS t (key, fingerprint, token, status, expires_at, attempt, fence)
SELECT v.key, v.fingerprint, v.token, 1, c.n + v.lease, 1, greatest(1, {us})
FROM unnest($1::text[], $2::text[], $3::text[], $4::interval[]) AS v(key, fingerprint, token, lease),
	(SELECT clock_timestamp() AS n) AS c
ORDER BY v.key COLLATE "C"
ON CONFLICT (key) DO NOTHING
RETURNING t.key, t.expires_at, t.fence`),

		completeMany: r.Replace(`UPDATE {t} AS t SET status = 2,
	response = CASE WHEN t.status = 1 THEN v.response ELSE t.response END,
	expires_at = CASE WHEN t.status = 1 THEN clock_timestamp() + v.retention ELSE t.expires_at END
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::interval[]) AS v(key, token, response, retention)
WHERE t.key = v.key AND t.token = v.token AND t.expires_at > clock_timestamp()
RETURNING t.key`),

		release: r.Replace(`DELETE FROM {t} WHERE key = $1 AND token = $2 AND status = 1 AND expires_at > clock_timestamp()`),

		get: r.Replace(`SELECT fingerprint, token, status, response, expires_at, attempt, fence FROM {t}
WHERE key = $1 AND expires_at > clock_timestamp()`),

		purge: r.Replace(`DELETE FROM {t} WHERE key IN (
	SELECT key FROM {t} WHERE expires_at <= clock_timestamp()
		AND (status = 2 OR expires_at <= clock_timestamp() - {kept})
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= clock_timestamp() AND (status = 2 OR expires_at <= clock_timestamp() - {kept})`),
	}
}
