package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store"
)

// maxClaimAttempts bounds Claim's loop. Each further attempt needs the key's
// row to change under it again (released, purged, taken over) or a deadlock
// that the server resolved by rolling the statement back, so a claim that
// runs out of attempts means something keeps rewriting the key.
const maxClaimAttempts = 16

// Server error numbers the Store tells apart.
const (
	errDupEntry        = 1062 // ER_DUP_ENTRY: the key has a row
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK: the server rolled the whole transaction back
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: only the statement was rolled back
)

func serverErr(err error, number uint16) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// IsDeadlock reports whether err is (or wraps) the server's deadlock error
// 1213, after which InnoDB has rolled back the whole transaction.
func IsDeadlock(err error) bool { return serverErr(err, errDeadlock) }

// row is one record as read from the table.
type row struct {
	fingerprint string
	token       string
	status      int8
	response    []byte
	expiresUS   int64
	attempt     uint32
	fence       uint64
}

func (r *row) record(key string) store.Record {
	exp := fromMicros(r.expiresUS)
	rec := store.Record{
		Key:         key,
		Fingerprint: r.fingerprint,
		Token:       store.Token(r.token),
		ExpiresAt:   exp,
		Attempt:     r.attempt,
		Fence:       r.fence,
	}
	if r.status == statusCompleted {
		rec.Status = store.StatusCompleted
		rec.Response = r.response
		if rec.Response == nil {
			rec.Response = []byte{}
		}
	} else {
		rec.Status = store.StatusInProgress
		rec.LockedUntil = exp
	}
	return rec
}

// Claim implements store.Store. A new key takes one round trip: an INSERT
// that reports the lease's end it wrote. A key that has a row takes two: the
// INSERT, refused by the primary key without writing anything, and a SELECT
// of the row, so a replay, an InProgress and a Mismatch write nothing.
// Taking over a lapsed lease or renewing the caller's own lease is one
// conditional UPDATE more, which names the row it read (token, status,
// attempt and fence), so it applies only to that row. The claim's Attempt
// and Fence are set by the INSERT or UPDATE itself, on the server's clock,
// as store.Successor says; the Store works them out from the row it read
// and the lease's end the statement reports, with no round trip more.
// A deadlock (1213) on an autocommit statement is retried; in a
// transaction it is returned, and InTx runs the transaction again.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	return s.runner(ctx).claim(ctx, key, fingerprint, token, lease)
}

func (r runner) claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("mysql: claim: %w", err)
	}
	if err := r.usable(ctx); err != nil {
		return store.Claim{}, fmt.Errorf("mysql: claim: %w", err)
	}
	us := micros(lease)
	read := stmtRead
	if r.st != nil {
		read = stmtReadLocking
	}
	for range maxClaimAttempts {
		res, err := r.exec(ctx, stmtInsert, key, fingerprint, string(token), us)
		if err == nil {
			until, err := res.LastInsertId()
			if err != nil {
				return store.Claim{}, fmt.Errorf("mysql: claim: %w", err)
			}
			// The INSERT wrote attempt 1 and fence GREATEST(now, 1), now
			// being the instant its lease starts: until minus the lease.
			attempt, fence := store.Successor(store.Record{}, false, token, fromMicros(until-us))
			return acquired(key, fingerprint, token, fromMicros(until), attempt, fence), nil
		}
		if r.retryable(err) {
			continue
		}
		if !serverErr(err, errDupEntry) {
			return store.Claim{}, fmt.Errorf("mysql: claim: %w", err)
		}
		var (
			cur   row
			nowUS int64
		)
		err = r.queryRow(ctx, read, key).
			Scan(&cur.fingerprint, &cur.token, &cur.status, &cur.response, &cur.expiresUS, &cur.attempt, &cur.fence, &nowUS)
		if errors.Is(err, sql.ErrNoRows) {
			continue // released or purged since the INSERT: try again
		}
		if r.retryable(err) {
			continue
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("mysql: claim: read: %w", err)
		}
		if cur.expiresUS <= nowUS {
			// Lapsed lease or retention over: the key is absent. Take the
			// row over if it is still the one just read.
			res, err := r.exec(ctx, stmtTakeover, fingerprint, string(token), us,
				key, cur.token, cur.status, cur.attempt, cur.fence)
			if r.retryable(err) {
				continue
			}
			if err != nil {
				return store.Claim{}, fmt.Errorf("mysql: claim: take over: %w", err)
			}
			// The UPDATE matched only the row read, so it computed the
			// attempt and fence from these values, at its own now.
			prev := cur.record(key)
			succ := func(until int64) (uint32, uint64) {
				return store.Successor(prev, true, token, fromMicros(until-us))
			}
			if c, ok, err := acquiredBy(res, key, fingerprint, token, succ); err != nil || ok {
				return c, err
			}
			continue // someone else changed it first: look again
		}
		// Live on the server's clock (checked above): no now to compare.
		rec := cur.record(key)
		if f := store.Classify(rec, fingerprint, token, time.Time{}); !f.Write {
			return store.Claim{Outcome: f.Outcome, Record: rec}, nil
		}
		if cur.expiresUS == nowUS+us {
			// Our own live lease already ends where the renewal would put
			// it (a clock that read the same microsecond twice, or a
			// session's pinned timestamp): the UPDATE would change no row.
			return acquired(key, fingerprint, token, fromMicros(cur.expiresUS), cur.attempt, cur.fence), nil
		}
		// Our own live lease: renew it, keeping its attempt and fence.
		res, err = r.exec(ctx, stmtReclaim, us, key, string(token), cur.attempt, cur.fence)
		if r.retryable(err) {
			continue
		}
		if err != nil {
			return store.Claim{}, fmt.Errorf("mysql: claim: renew: %w", err)
		}
		keep := func(int64) (uint32, uint64) { return cur.attempt, cur.fence }
		if c, ok, err := acquiredBy(res, key, fingerprint, token, keep); err != nil || ok {
			return c, err
		}
		// Lapsed, completed or released meanwhile, or (without
		// clientFoundRows) renewed to the very same microsecond: look again.
	}
	return store.Claim{}, fmt.Errorf("mysql: claim: the key's row changed under %d attempts in a row", maxClaimAttempts)
}

// acquiredBy reads the result of a takeover or renewal: one row changed
// means token holds the key until the reported expiry. It does not matter
// whether the DSN sets clientFoundRows: the UPDATE changes the row it
// matches (a new expiry; claim skips a renewal to the expiry the lease
// already has), so found and changed rows agree. succ returns the
// attempt and fence the UPDATE wrote, given the expiry it reported.
func acquiredBy(res sql.Result, key, fingerprint string, token store.Token, succ func(until int64) (uint32, uint64)) (store.Claim, bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("mysql: claim: %w", err)
	}
	if n == 0 {
		return store.Claim{}, false, nil
	}
	until, err := res.LastInsertId()
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("mysql: claim: %w", err)
	}
	attempt, fence := succ(until)
	return acquired(key, fingerprint, token, fromMicros(until), attempt, fence), true, nil
}

func acquired(key, fingerprint string, token store.Token, until time.Time, attempt uint32, fence uint64) store.Claim {
	return store.Claim{Outcome: store.Acquired, Record: store.Record{
		Key:         key,
		Fingerprint: fingerprint,
		Status:      store.StatusInProgress,
		Token:       token,
		LockedUntil: until,
		ExpiresAt:   until,
		Attempt:     attempt,
		Fence:       fence,
	}}
}

// micros converts d to whole microseconds (the server's resolution),
// rounding up so that a positive duration never becomes zero.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return us
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us) }
