package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// inspectCols are the columns an Entry is built from, for scanEntry: the
// last says whether the deadline is over on the server's clock.
const inspectCols = `key, token, status, octet_length(fingerprint), coalesce(octet_length(response), 0), expires_at, expires_at <= (SELECT clock_timestamp()), attempt, fence`

// List implements store.Inspector with one SELECT ... ORDER BY expires_at,
// key LIMIT n on the server's clock, served by the table's index on
// expires_at (an index range from the cursor on, then an incremental sort
// by key within equal expires_at). A read under MVCC: it never blocks a
// writer and no writer blocks it.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	after, limit, err := o.Check()
	if err != nil {
		return store.Page{}, fmt.Errorf("postgres: %w", err)
	}
	q, args := s.listQuery(o, after, limit)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("postgres: list: %w", err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return store.Page{}, fmt.Errorf("postgres: list: %w", err)
	}
	return store.PageOf(entries, limit), nil
}

// listQuery returns List's statement and its arguments.
func (s *Store) listQuery(o store.ListOptions, after store.Position, limit int) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if st, over, ok := o.State.Split(); ok {
		cmp := " > "
		if over {
			cmp = " <= "
		}
		where = append(where, "status = "+strconv.Itoa(int(st)), "expires_at"+cmp+"(SELECT clock_timestamp())")
	}
	if !after.ExpiresAt.IsZero() {
		at := arg(after.ExpiresAt)
		where = append(where, "expires_at >= "+at, "(expires_at > "+at+" OR key > "+arg(after.Key)+")")
	}
	if !o.ExpiresBefore.IsZero() {
		where = append(where, "expires_at < "+arg(o.ExpiresBefore))
	}
	if o.Prefix != "" {
		where = append(where, "starts_with(key, "+arg(o.Prefix)+")")
	}
	q := `SELECT ` + inspectCols + ` FROM ` + s.table
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY expires_at, key LIMIT ` + arg(limit+1)
	return q, args // after arg has appended the limit
}

// Count implements store.Inspector with one aggregate over the table (a
// full scan under MVCC, which blocks no writer).
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	var oldest *time.Time
	err := s.db.QueryRow(ctx, `SELECT
	count(*) FILTER (WHERE status = 1 AND expires_at > n), count(*) FILTER (WHERE status = 1 AND expires_at <= n),
	count(*) FILTER (WHERE status = 2 AND expires_at > n), count(*) FILTER (WHERE status = 2 AND expires_at <= n),
	min(expires_at) FILTER (WHERE status = 1 AND expires_at > n)
FROM `+s.table+`, (SELECT clock_timestamp() AS n) AS now`).Scan(&c.InProgress, &c.Lapsed, &c.Completed, &c.Expired, &oldest)
	if err != nil {
		return store.Counts{}, fmt.Errorf("postgres: count: %w", err)
	}
	if oldest != nil {
		c.OldestLease = *oldest
	}
	return c, nil
}

// Lookup implements store.Inspector.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("postgres: lookup: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT `+inspectCols+` FROM `+s.table+` WHERE key = $1`, key)
	if err != nil {
		return store.Entry{}, fmt.Errorf("postgres: lookup: %w", err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEntry)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Entry{}, fmt.Errorf("postgres: lookup %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return store.Entry{}, fmt.Errorf("postgres: lookup: %w", err)
	}
	return e, nil
}

// scanEntry reads a row of inspectCols.
func scanEntry(row pgx.CollectableRow) (store.Entry, error) {
	var (
		e       store.Entry
		token   string
		status  int16
		over    bool
		attempt int32
		fence   int64
	)
	if err := row.Scan(&e.Key, &token, &status, &e.FingerprintSize, &e.ResponseSize, &e.ExpiresAt, &over, &attempt, &fence); err != nil {
		return store.Entry{}, err
	}
	e.Attempt, e.Fence = uint32(attempt), uint64(fence)
	var st store.Status
	switch status {
	case 1:
		st = store.StatusInProgress
		e.LockedUntil = e.ExpiresAt
	case 2:
		st = store.StatusCompleted
	default:
		return store.Entry{}, fmt.Errorf("key %q: unknown status %d", e.Key, status)
	}
	e.State = store.StateOf(st, over)
	e.TokenHash = store.HashToken(store.Token(token))
	return e, nil
}
