// Package store defines the contract between idemkit and the storage that
// remembers idempotency keys: the Store interface, its records and outcomes,
// the sentinel errors, and the argument checks every backend shares.
//
// # The state machine
//
// Every key is in exactly one of three states:
//
//   - in progress: claimed by a Token, with a lease that lapses at
//     Record.LockedUntil. Work for the key is (or was) running somewhere.
//   - completed: the work finished and its response bytes are kept until
//     Record.ExpiresAt (the retention), so retries can replay them.
//   - absent: never claimed, released, retention over, or an in-progress lease
//     that lapsed. A lapsed lease is exactly like a key that was never claimed:
//     the next Claim takes it over.
//
// The transitions, which every backend must implement and which the
// conformance suite in package storetest checks, are:
//
//	call                   state of the key                         result
//	Claim(k, fp, t)        absent                                   Acquired: in progress held by t until now+lease
//	Claim(k, fp, t)        in progress by t, same fp                Acquired again, lease renewed (re-entrant)
//	Claim(k, fp, t)        in progress by another token, lease live InProgress, with the record
//	Claim(k, fp, t)        completed, same fp                       Completed, with the record: replay Record.Response
//	Claim(k, fp2, t)       live record with another fingerprint     Mismatch (checked before in progress)
//	Complete(k, t, resp)   in progress by t                         completed, kept until now+retention
//	Complete(k, t, resp)   completed by t                           nil: a retried Complete succeeds, FIRST response and retention kept
//	Complete(k, t, resp)   absent, or another token's record        ErrLeaseLost, nothing changes
//	Release(k, t)          in progress by t, lease live             absent
//	Release(k, t)          anything else (a lapsed lease too)       nil, nothing changes
//	Renew(k, t, lease)     in progress by t, lease live             nil, lease extended to now+lease
//	Renew(k, t, lease)     anything else (absent, lapsed, released,  ErrLeaseLost, nothing changes: never creates
//	                       completed, another token's lease)        or revives a record
//	Get(k)                 live record                              the record
//	Get(k)                 absent                                   ErrNotFound
//
// Rules that hold everywhere:
//
//   - Claim is atomic. Of N concurrent Claims of one absent key with distinct
//     tokens exactly one is Acquired; the others see InProgress, or Completed
//     if the winner already finished. Only the engine's own atomic primitive
//     (a unique index, SET NX, a mutex held across check and write) may decide
//     this, never a read followed by a separate write.
//   - Every call is itself safe to retry after a lost reply.
//   - Every claim that acquires a key sets the record's Attempt and Fence
//     as Successor says: a takeover of a lapsed lease counts one more
//     attempt and gets a larger fence than the lease it took over, so the
//     work can tell it is a takeover (Claim.Takeover) and downstream writes
//     can refuse the stale holder. To count takeovers a store keeps a
//     lapsed record for LapsedKept after its lease (Purge and a server's
//     own expiry leave it until then) and counts from 1 again after that.
//     A release says the work had no effect: the next claim counts from 1.
//   - Renewal is Store.Renew, never a Claim: a heartbeat that arrives
//     after the holder released its key must not bring the key back.
//   - After a lease lapses, Complete by the old token may fail with
//     ErrLeaseLost; once another token has claimed the key it must fail, and
//     the new holder's record is left untouched (fencing).
//   - Duplicates are normal outcomes reported in Claim's result. Errors are
//     for invalid arguments (ErrInvalid), a missing record (ErrNotFound), a
//     lost lease (ErrLeaseLost), and failures of the backend, which wrap the
//     driver's error and never match the sentinels.
//   - A cancelled or expired context makes a call return promptly with an
//     error that matches ctx.Err().
//   - Invalid arguments are rejected before anything is written.
//
// # Optional interfaces
//
// A backend may also implement Purger (delete records whose retention is
// over), Transactor (run Claim, the caller's own writes and Complete in one
// database transaction), Migrator (create its tables), Inspector (list and
// count records by state, for operators: cmd/idemctl) and io.Closer. Callers
// discover them with a type assertion; Migrate and Close do it for the two
// that every program needs.
//
// # Opening a store from a URL
//
// Open makes a Store from a URL such as "sqlite:///var/lib/app/keys.db",
// "postgres://host/db", "redis://host:6379/0" or "memory://", so the store
// is chosen per environment by configuration. Backends register their URL
// schemes with Register when imported, as database/sql drivers do; this
// package imports none of them, so a program imports the backends it offers:
//
//	import _ "github.com/idemkit/idemkit/store/postgres"
package store
