package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// stmtID names one of the Store's statements.
type stmtID int

const (
	stmtClaim stmtID = iota
	stmtInsert
	stmtRead
	stmtGet
	stmtComplete
	stmtRelease
	stmtRenew
	stmtPurge
	stmtLock
	numStmts
)

// buildQuery returns the SQL of statement id for the quoted table name t.
// Parameters are numbered; times are unix microseconds.
func buildQuery(id stmtID, t string) string {
	switch id {
	case stmtClaim:
		// ?1 key, ?2 fingerprint, ?3 token, ?4 locked_until, ?5 now.
		// Takes the key when it is absent (no row, retention over, lease
		// lapsed) or already held by the same token for the same
		// fingerprint (re-entrant renewal). Changes no row, and returns
		// none, otherwise. attempt and fence follow store.Successor, from
		// the row as it was (SET reads the old row): a live row passes the
		// WHERE only as the caller's own lease (kept), a lapsed lease is
		// taken over (one attempt more), a completed row whose retention
		// is over starts again at attempt 1; the fence grows past the old
		// one and is at least now. It returns the row's new attempt and
		// fence.
		return `INSERT INTO ` + t + ` (key, fingerprint, token, status, response, locked_until, expires_at, attempt, fence)
VALUES (?1, ?2, ?3, 1, NULL, ?4, ?4, 1, max(?5, 1))
ON CONFLICT (key) DO UPDATE SET
	fingerprint = excluded.fingerprint,
	token = excluded.token,
	status = 1,
	response = NULL,
	locked_until = excluded.locked_until,
	expires_at = excluded.expires_at,
	attempt = CASE WHEN ` + t + `.expires_at > ?5 THEN ` + t + `.attempt
		WHEN ` + t + `.status = 1 THEN max(` + t + `.attempt, 1) + 1
		ELSE 1 END,
	fence = CASE WHEN ` + t + `.expires_at > ?5 THEN ` + t + `.fence
		ELSE max(` + t + `.fence + 1, ?5) END
WHERE ` + t + `.expires_at <= ?5
	OR (` + t + `.status = 1 AND ` + t + `.token = excluded.token AND ` + t + `.fingerprint = excluded.fingerprint)
RETURNING attempt, fence`
	case stmtInsert:
		// ?1 key, ?2 fingerprint, ?3 token, ?4 locked_until, ?5 now: the
		// arguments of stmtClaim. Takes an absent key only, with the row
		// stmtClaim would insert (attempt 1, fence max(now, 1)), and changes
		// nothing when a row is there, whatever it is: a claim that writes
		// first runs it (see runner.claim), so a new key costs one plain
		// INSERT, without RETURNING, and anything else is judged from a
		// read and stmtClaim.
		return `INSERT INTO ` + t + ` (key, fingerprint, token, status, response, locked_until, expires_at, attempt, fence)
VALUES (?1, ?2, ?3, 1, NULL, ?4, ?4, 1, max(?5, 1))
ON CONFLICT (key) DO NOTHING`
	case stmtRead:
		// ?1 key. The row as it is, live or not: Claim judges it.
		return `SELECT ` + readColumns + ` FROM ` + t + ` WHERE key = ?1`
	case stmtGet:
		// ?1 key, ?2 now.
		return `SELECT ` + readColumns + ` FROM ` + t + ` WHERE key = ?1 AND expires_at > ?2`
	case stmtComplete:
		// ?1 key, ?2 token, ?3 response, ?4 expires_at, ?5 now.
		// Succeeds for a live record of the token, in progress or completed;
		// a completed one keeps its first response and expiry (SET reads the
		// row as it was).
		return `UPDATE ` + t + ` SET status = 2,
	response = CASE WHEN status = 1 THEN ?3 ELSE response END,
	locked_until = 0,
	expires_at = CASE WHEN status = 1 THEN ?4 ELSE expires_at END
WHERE key = ?1 AND token = ?2 AND expires_at > ?5`
	case stmtRelease:
		// ?1 key, ?2 token, ?3 now. Only a live lease of the token: a
		// lapsed one stays, for the attempt count of the claim that takes
		// it over.
		return `DELETE FROM ` + t + ` WHERE key = ?1 AND token = ?2 AND status = 1 AND expires_at > ?3`
	case stmtRenew:
		// ?1 key, ?2 token, ?3 now, ?4 locked_until. Only a live lease of
		// the token; it never creates or revives a row.
		return `UPDATE ` + t + ` SET locked_until = ?4, expires_at = ?4
WHERE key = ?1 AND token = ?2 AND status = 1 AND expires_at > ?3`
	case stmtPurge:
		// ?1 now, ?2 batch size, ?3 now - store.LapsedKept. Completed
		// records whose retention is over, and in-progress ones whose lease
		// lapsed before ?3. Uses the expires_at index.
		return `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires_at <= ?1 AND (status <> 1 OR expires_at <= ?3) LIMIT ?2)`
	case stmtLock:
		// Writes nothing but takes SQLite's write lock: the first statement
		// of a transaction InTx begins on a pool that may begin DEFERRED.
		return `UPDATE ` + t + ` SET status = status WHERE 0`
	}
	panic("sqlite: unknown statement") // unreachable: ids are constants
}

// readColumns is what stmtRead and stmtGet select, for scanRecord: six
// columns, as a hand-written replay reads (raw in bench_test.go), where
// the row has nine.
//
//   - No key (the caller has it) and no locked_until: every statement that
//     writes a row sets it to expires_at in progress and to 0 once
//     completed (see Schema), so scanRecord derives it.
//   - status and attempt in one integer, state: attempt<<2 | status, with
//     a status other than 1 or 2 read as 0, which scanRecord rejects as it
//     rejected an unknown status (no status can pass for another).
//   - Every column named by one letter, and the ones that are not TEXT read
//     through an expression (unary + returns its operand unchanged, NULL,
//     blob or integer), which has no declared type: modernc.org/sqlite
//     copies each result column's name and declared type into Go strings on
//     every query, two allocations a column, where a one-byte name is
//     Go's static string and no declared type is none. fingerprint and
//     token keep their TEXT type, so a pool opened with _texttotime (New
//     takes any *sql.DB) never parses them as times, as it would a TEXT
//     value without one.
const readColumns = `fingerprint AS f, token AS t, (attempt << 2) | CASE status WHEN 1 THEN 1 WHEN 2 THEN 2 ELSE 0 END AS s, +response AS r, +expires_at AS e, +fence AS n`

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var errClosed = errors.New("store is closed")

// preparedStmt is a statement prepared on first use; preparing fails until
// the table exists, and is tried again on the next use.
type preparedStmt struct {
	query  string
	p      atomic.Pointer[sql.Stmt]
	mu     sync.Mutex
	closed bool
}

func (ps *preparedStmt) get(ctx context.Context, db *sql.DB) (*sql.Stmt, error) {
	if st := ps.p.Load(); st != nil {
		return st, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, errClosed
	}
	if st := ps.p.Load(); st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, ps.query)
	if err != nil {
		return nil, prepareError(err)
	}
	ps.p.Store(st)
	return st, nil
}

// prepareError explains a statement that does not fit the table because
// the table is of an earlier version, which Migrate upgrades.
func prepareError(err error) error {
	if strings.Contains(err.Error(), "no such column") {
		return fmt.Errorf("%w (the table is of an earlier version of idemkit: run Migrate to upgrade it)", err)
	}
	return err
}

func (ps *preparedStmt) close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	if st := ps.p.Swap(nil); st != nil {
		return st.Close()
	}
	return nil
}

// prepareAll prepares every statement on the database, so that transactions
// find them ready (see runner.stmt). It needs the table.
func (s *Store) prepareAll(ctx context.Context) error {
	for i := range s.stmts {
		if _, err := s.stmts[i].get(ctx, s.db); err != nil {
			return err
		}
	}
	return nil
}
