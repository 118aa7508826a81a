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

// Successor returns the Attempt and Fence of a claim that acquires a key at
// now, as every backend computes them (in Go, SQL or a server script):
//
//   - no record stored under the key: Attempt 1, Fence max(1, now in µs);
//   - the caller's own live lease (a re-entrant Claim): prev's Attempt and
//     Fence, unchanged;
//   - a lapsed lease (in progress, ExpiresAt not after now), taken over:
//     prev.Attempt+1, and Fence max(prev.Fence+1, now in µs);
//   - a completed record whose retention is over: Attempt 1, and Fence
//     max(prev.Fence+1, now in µs).
//
// found says whether prev is a stored record; now is the store's clock.
func Successor(prev Record, found bool, token Token, now time.Time) (attempt uint32, fence uint64) {
	clock := uint64(max(now.UnixMicro(), 0))
	switch {
	case !found:
		return 1, max(clock, 1)
	case prev.ExpiresAt.After(now) && prev.Status == StatusInProgress && prev.Token == token:
		return prev.Attempt, prev.Fence
	case prev.Status == StatusInProgress:
		return max(prev.Attempt, 1) + 1, max(prev.Fence+1, clock)
	}
	return 1, max(prev.Fence+1, clock)
}
