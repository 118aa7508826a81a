package store

import "time"

// A Finding is what Classify decides about a record that a Claim found
// under its key.
type Finding struct {
	// Outcome is what the Claim reports. Acquired means the caller's token
	// gets the key, but only once the backend has written that (Write).
	Outcome Outcome
	// Write is set with Acquired: the backend must write the claim before
	// reporting it, taking the record over (Lapsed) or renewing the caller's
	// own lease, and look again when that write finds the record changed.
	Write bool
	// Lapsed says the record is absent: its lease or its retention is over
	// (ExpiresAt is not after now), so it is taken over as if never claimed.
	Lapsed bool
}

// Classify decides what a Claim for fingerprint by token finds in r, the
// live-or-lapsed record stored under its key, at now. It is the one rule
// every idemkit backend applies (memory, sqlite, postgres, mysql, redis),
// in this order:
//
//   - ExpiresAt not after now: absent; take it over (Acquired, Write, Lapsed).
//   - another fingerprint: Mismatch (checked before in progress, so a key
//     reused for another request is told so even while the first runs).
//   - completed: Completed (replay r.Response).
//   - in progress by token: the caller's own claim; renew its lease
//     (Acquired, Write).
//   - in progress by another token: InProgress.
//
// A backend whose server decides liveness itself (comparing on the
// server's clock) passes the zero time for a record the server found live.
func Classify(r Record, fingerprint string, token Token, now time.Time) Finding {
	switch {
	case !r.ExpiresAt.After(now):
		return Finding{Outcome: Acquired, Write: true, Lapsed: true}
	case r.Fingerprint != fingerprint:
		return Finding{Outcome: Mismatch}
	case r.Status == StatusCompleted:
		return Finding{Outcome: Completed}
	case r.Token == token:
		return Finding{Outcome: Acquired, Write: true}
	}
	return Finding{Outcome: InProgress}
}
