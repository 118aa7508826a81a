package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// inspectCols are the columns an Entry is built from, for scanEntry: the
// last says whether the deadline is over on the server's clock.
const inspectCols = "`key`, token, status, LENGTH(fingerprint), COALESCE(LENGTH(response), 0), attempt, fence, " + expUS + ", expires_at <= UTC_TIMESTAMP(6)"

// atArg is a time argument in microseconds since the Unix epoch, as a DATETIME(6).
const atArg = "DATE_ADD(" + epoch + ", INTERVAL ? MICROSECOND)"

// List implements store.Inspector with one SELECT ... ORDER BY expires_at,
// `key` LIMIT n on the server's clock, served by the table's index on
// expires_at: InnoDB keeps the primary key (`key`) in every secondary
// index entry, so the index holds the rows in exactly List's order, and
// the cursor and the state bound an index range. A consistent
// (non-locking) read: it never blocks a writer. It reads outside any
// transaction ctx carries.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	after, limit, err := o.Check()
	if err != nil {
		return store.Page{}, fmt.Errorf("mysql: %w", err)
	}
	q, args := s.listQuery(o, after, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("mysql: list: %w", err)
	}
	defer rows.Close()
	var entries []store.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return store.Page{}, fmt.Errorf("mysql: list: %w", err)
		}
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("mysql: list: %w", err)
	}
	return store.PageOf(entries, limit), nil
}

// listQuery returns List's statement and its arguments.
func (s *Store) listQuery(o store.ListOptions, after store.Position, limit int) (string, []any) {
	var where []string
	var args []any
	if st, over, ok := o.State.Split(); ok {
		cmp := " > "
		if over {
			cmp = " <= "
		}
		where = append(where, "status = "+strconv.Itoa(int(st)), "expires_at"+cmp+"UTC_TIMESTAMP(6)")
	}
	if !after.ExpiresAt.IsZero() {
		at := after.ExpiresAt.UnixMicro()
		where = append(where, "expires_at >= "+atArg, "(expires_at > "+atArg+" OR `key` > ?)")
		args = append(args, at, at, after.Key)
	}
	if !o.ExpiresBefore.IsZero() {
		where = append(where, "expires_at < "+atArg)
		args = append(args, o.ExpiresBefore.UnixMicro())
	}
	if o.Prefix != "" {
		where = append(where, "LEFT(`key`, LENGTH(?)) = ?")
		args = append(args, []byte(o.Prefix), []byte(o.Prefix))
	}
	q := "SELECT " + inspectCols + " FROM " + s.table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY expires_at, `key` LIMIT ?", append(args, limit+1)
}

// Count implements store.Inspector with one aggregate over the table (a
// full scan, by a consistent read that blocks no writer).
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	var oldest sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT
	COALESCE(SUM(status = 1 AND expires_at > n), 0), COALESCE(SUM(status = 1 AND expires_at <= n), 0),
	COALESCE(SUM(status = 2 AND expires_at > n), 0), COALESCE(SUM(status = 2 AND expires_at <= n), 0),
	MIN(CASE WHEN status = 1 AND expires_at > n THEN `+expUS+` END)
FROM `+s.table+`, (SELECT UTC_TIMESTAMP(6) AS n) AS now`).Scan(&c.InProgress, &c.Lapsed, &c.Completed, &c.Expired, &oldest)
	if err != nil {
		return store.Counts{}, fmt.Errorf("mysql: count: %w", err)
	}
	if oldest.Valid {
		c.OldestLease = time.UnixMicro(oldest.Int64)
	}
	return c, nil
}

// Lookup implements store.Inspector.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("mysql: lookup: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+inspectCols+" FROM "+s.table+" WHERE `key` = ?", []byte(key))
	if err != nil {
		return store.Entry{}, fmt.Errorf("mysql: lookup: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return store.Entry{}, fmt.Errorf("mysql: lookup: %w", err)
		}
		return store.Entry{}, fmt.Errorf("mysql: lookup %q: %w", key, store.ErrNotFound)
	}
	e, err := scanEntry(rows)
	if err != nil {
		return store.Entry{}, fmt.Errorf("mysql: lookup: %w", err)
	}
	return e, rows.Err()
}

// scanEntry reads a row of inspectCols.
func scanEntry(rows *sql.Rows) (store.Entry, error) {
	var (
		e      store.Entry
		key    []byte
		token  string
		status int64
		expire int64
		over   bool
	)
	if err := rows.Scan(&key, &token, &status, &e.FingerprintSize, &e.ResponseSize, &e.Attempt, &e.Fence, &expire, &over); err != nil {
		return store.Entry{}, err
	}
	e.Key = string(key)
	e.ExpiresAt = time.UnixMicro(expire)
	var st store.Status
	switch status {
	case statusInProgress:
		st = store.StatusInProgress
		e.LockedUntil = e.ExpiresAt
	case statusCompleted:
		st = store.StatusCompleted
	default:
		return store.Entry{}, fmt.Errorf("key %q: unknown status %d", e.Key, status)
	}
	e.State = store.StateOf(st, over)
	e.TokenHash = store.HashToken(store.Token(token))
	return e, nil
}
