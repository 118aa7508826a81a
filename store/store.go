package store

import (
	"context"
	"strconv"
	"time"
)

// Store remembers idempotency keys. Implementations must be safe for
// concurrent use by multiple goroutines and must follow the state machine in
// the package documentation; package storetest checks that they do.
type Store interface {
	// Claim tries to take key for the claim token. fingerprint identifies the
	// request the key was first used with (it may be empty when the caller
	// does not check requests); lease is how long the claim is held before it
	// lapses unless renewed by claiming again with the same token.
	//
	// A duplicate is a normal outcome reported in the result, never as an
	// error: Acquired means the caller now holds the key and should do the
	// work, Completed means the work was already done and Record.Response is
	// the answer to replay, InProgress means another token holds a live lease,
	// and Mismatch means the key was used with another fingerprint.
	// The returned error is for invalid arguments (ErrInvalid) and backend
	// failures only.
	Claim(ctx context.Context, key, fingerprint string, token Token, lease time.Duration) (Claim, error)

	// Complete stores response for key and marks it completed, to be kept for
	// retention. It succeeds when token holds the key. When token already
	// completed the key, a retried Complete returns nil and changes nothing:
	// the first response and retention stay, because a client may already
	// have been replayed the first response, and a replay must never change.
	// Otherwise it returns ErrLeaseLost and changes nothing.
	Complete(ctx context.Context, key string, token Token, response []byte, retention time.Duration) error

	// Release gives up token's claim on key, making it absent so a retry can
	// claim it and run the work again. It returns nil and changes nothing when
	// token does not hold the key: it never deletes another token's claim or a
	// completed record.
	Release(ctx context.Context, key string, token Token) error

	// Renew extends the lease that token holds on key to lease from now, as
	// a heartbeat while the work runs. It never creates a record and never
	// revives a lease that is over: when token does not hold a live lease on
	// key (the key is absent, released, lapsed, completed, or held by
	// another token) it returns ErrLeaseLost and changes nothing. A renewal
	// that reaches the store after the holder released the key therefore
	// leaves the key free for the retry the release was for. Renew keeps
	// the record's Attempt and Fence. Its arguments are checked as
	// CheckRenew checks them.
	Renew(ctx context.Context, key string, token Token, lease time.Duration) error

	// Get returns the live record for key, or ErrNotFound when the key is
	// absent (never claimed, released, expired, or its lease lapsed).
	Get(ctx context.Context, key string) (Record, error)
}

// Status is the state of a live record.
type Status uint8

const (
	// StatusInProgress: the key is claimed and its lease has not lapsed.
	StatusInProgress Status = iota + 1
	// StatusCompleted: the work is done and the response is kept.
	StatusCompleted
)

// String returns "in progress", "completed", or "Status(N)" for an unknown value.
func (s Status) String() string {
	switch s {
	case StatusInProgress:
		return "in progress"
	case StatusCompleted:
		return "completed"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Record is what a store keeps for a live key.
type Record struct {
	// Key is the key as the caller passed it.
	Key string
	// Fingerprint identifies the request that first claimed the key.
	Fingerprint string
	// Status is StatusInProgress or StatusCompleted.
	Status Status
	// Token is the holder of the lease (in progress) or the claim that
	// completed the record (completed).
	Token Token
	// Response holds the bytes passed to Complete (completed only). Stores
	// return a copy the caller may keep and modify.
	Response []byte
	// LockedUntil is when the lease lapses (in progress only; zero otherwise).
	LockedUntil time.Time
	// ExpiresAt is when the record becomes absent: the end of the lease for a
	// record in progress, the end of the retention for a completed one.
	// The record is live while the store's clock reads earlier than
	// ExpiresAt and absent from that instant on: at exactly ExpiresAt (or
	// LockedUntil) a Claim by another token acquires the key.
	ExpiresAt time.Time
	// Attempt counts the claims that acquired the key for this record: 1
	// for the claim that created it, one more for each claim that took over
	// a lapsed lease (a takeover: the earlier holder may have acted before
	// it lost the key). A re-entrant Claim and Renew keep it; a completed
	// record keeps the Attempt of the claim that completed it. A key that
	// was released, or whose retention ended, starts again at 1.
	Attempt uint32
	// Fence is a number that grows for the key with every claim that
	// acquires it, so that the work can pass it to its own writes and a
	// downstream system can refuse a stale holder (WHERE fence < $new).
	// A claim that acquires the key sets it to Successor's value: larger
	// than the fence of the record it replaces, and at least the store's
	// clock in microseconds since the Unix epoch, so that it keeps growing
	// across a release or a purge while that clock moves forward. A
	// re-entrant Claim and Renew keep it.
	Fence uint64
}

// Outcome says what a Claim found.
type Outcome uint8

const (
	// Acquired: the caller's token now holds the key; do the work, then
	// Complete or Release.
	Acquired Outcome = iota + 1
	// Completed: the key was already completed with the same fingerprint;
	// replay Record.Response instead of doing the work again.
	Completed
	// InProgress: another token holds a live lease on the key; Record.LockedUntil
	// says when it lapses (a Retry-After hint).
	InProgress
	// Mismatch: the key is live with another fingerprint; the client reused a
	// key for a different request.
	Mismatch
)

// String returns "acquired", "completed", "in progress", "mismatch", or
// "Outcome(N)" for an unknown value.
func (o Outcome) String() string {
	switch o {
	case Acquired:
		return "acquired"
	case Completed:
		return "completed"
	case InProgress:
		return "in progress"
	case Mismatch:
		return "mismatch"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Claim is the result of Store.Claim: what the call found and the record as it
// stands after the call.
type Claim struct {
	Outcome Outcome
	Record  Record
}

// Takeover reports whether c acquired the key by taking over a lapsed
// lease (Record.Attempt above 1): an earlier holder ran the work for this
// key and lost its lease before it completed, so the effect may already
// have happened. The work should look it up (ask the payment provider by
// key, say) before acting again.
func (c Claim) Takeover() bool { return c.Outcome == Acquired && c.Record.Attempt > 1 }

// LapsedKept is how long every backend keeps a record whose lease lapsed
// and that no claim took over: Purge, a sweep or the server's own expiry
// deletes it only once its lease is LapsedKept behind it. Until then the
// record is absent to Claim and Get as any lapsed lease is, but the claim
// that takes it over counts one attempt more (Record.Attempt) and an
// Inspector lists it as lapsed. After that a claim counts from 1 again.
const LapsedKept = 24 * time.Hour

// Purger is implemented by stores that can delete records on demand. Stores
// whose engine expires records by itself (Redis) need not implement it.
type Purger interface {
	// Purge deletes records whose retention is over and in-progress records
	// whose lease lapsed more than LapsedKept ago, in bounded batches so it never blocks other
	// callers for long, and reports how many it deleted. It stops early with
	// ctx's error when ctx is done; what was deleted stays deleted.
	Purge(ctx context.Context) (int64, error)
}

// Transactor is implemented by SQL stores that can run the key, the caller's
// own writes and the stored response in one database transaction, so they
// commit or roll back together.
//
// InTx begins a transaction and calls fn with a Store bound to it and a
// context from which the backend's transaction can be retrieved (for example
// postgres.TxFrom or sqlite.TxFrom) for the caller's own statements. When fn
// returns nil the transaction commits; when it returns an error or panics the
// transaction rolls back (the panic is re-raised) and the key is left as it
// was before, so a retry runs the work again. A concurrent InTx that claims
// the same key waits until the first transaction ends and then sees its
// result: Completed after a commit, Acquired after a rollback.
//
// The lease still applies inside the transaction: a Complete after the lease
// ran out may fail with ErrLeaseLost, and fn should return that error so that
// everything rolls back. If fn returns nil after acquiring a key without
// completing or releasing it, the claim commits in progress and holds the key
// until its lease lapses.
//
// A store joins only its own transactions: another Store (on another
// database or table) called with fn's context runs outside this
// transaction, as if the context carried none. A Claim that waits behind a
// transaction holding its key returns when its own context ends.
type Transactor interface {
	InTx(ctx context.Context, fn func(ctx context.Context, s Store) error) error
}
