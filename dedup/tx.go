package dedup

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/store"
)

// ProcessTx is Process in one database transaction, for stores that
// implement store.Transactor (the SQL backends): the claim of id, fn's own
// writes and the record that id is processed commit together, or roll back
// together. This is the processed_events pattern: a unique key recorded in
// the same transaction as the effect.
//
// fn receives the transaction's context; get the driver's transaction from
// it (sqlite.TxFrom(ctx), postgres.TxFrom(ctx)) and make every write of the
// effect through it. The outcomes are those of Process:
//
//   - Processed: fn returned nil and the transaction committed.
//   - Duplicate: id was processed before; nothing was written.
//   - InFlight: a lease-mode Process of the same id is running elsewhere.
//     A concurrent ProcessTx of the same id does not see InFlight: it waits
//     on the key's row until the first transaction ends, then returns
//     Duplicate (commit) or runs fn itself (rollback).
//   - Failed: fn returned an error (returned as is, errors.Is matches it),
//     the claim failed, or the commit failed; everything rolled back (or,
//     for a lost reply to COMMIT, nobody knows: a redelivery replays or
//     runs, whichever is true), and a redelivery runs fn again.
//
// A panic in fn rolls the transaction back and goes on. There is no lease
// renewal: the transaction holds the key's row, so no other delivery can take
// id while fn runs, and a crash rolls back. If fn outlives the lease, the
// completion claims id again inside the transaction, which cannot be
// contested, and completes. A crash after the commit and before the ack
// leaves id recorded, so the redelivery is a Duplicate.
//
// Why a separate method rather than Process choosing by itself: the two
// modes make different promises to fn. In ProcessTx, fn must write through
// the transaction, and everything it does holds a database transaction open
// (on SQLite, the one write lock of the whole database), so it must be short
// and must not call out to other systems whose effects cannot roll back. In
// Process, fn may do anything, for any time, and its writes are its own.
// Choosing silently by the store's type would turn a long webhook handler
// into a long write transaction when the store is SQL, and would quietly drop
// the atomicity a caller relies on when the store is not. ProcessTx fails
// with store.ErrInvalid when the store is not a store.Transactor.
func (d *Deduper) ProcessTx(ctx context.Context, id string, fn func(ctx context.Context) error) (Outcome, error) {
	if !d.e.CanTransact() {
		return Failed, fmt.Errorf("dedup: process tx %q: store %T does not implement store.Transactor: %w", d.show(id), d.e.Store(), store.ErrInvalid)
	}
	key, err := d.check(ctx, "process tx", id, fn)
	if err != nil {
		return Failed, err
	}
	return d.do(ctx, d.tx, id, key, fingerprint, fn)
}
