package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// inspectCols are the columns an Entry is built from, for scanEntry.
const inspectCols = `key, token, status, length(CAST(fingerprint AS BLOB)), length(CAST(response AS BLOB)), locked_until, expires_at, attempt, fence`

// List implements store.Inspector with one SELECT ... ORDER BY expires_at,
// key LIMIT n, served by the table's index on expires_at (the range from
// the cursor on, and the bound of the state: a lapsed or expired record
// has expires_at at or before now). The key breaks ties within one
// expires_at. In WAL mode (Open's default) the read never blocks a writer.
// It reads the records outside any transaction ctx carries.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	after, limit, err := o.Check()
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlite: %w", err)
	}
	now := micros(s.now())
	q, args := s.listQuery(o, after, limit, now)
	release, err := s.readSlot(ctx)
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlite: list: %w", err)
	}
	defer release()
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlite: list: %w", err)
	}
	defer rows.Close()
	var entries []store.Entry
	for rows.Next() {
		e, err := scanEntry(rows, now)
		if err != nil {
			return store.Page{}, fmt.Errorf("sqlite: list: %w", err)
		}
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("sqlite: list: %w", err)
	}
	return store.PageOf(entries, limit), nil
}

// Count implements store.Inspector with one aggregate over the table: a
// full scan (in WAL mode it never blocks a writer).
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	release, err := s.readSlot(ctx)
	if err != nil {
		return store.Counts{}, fmt.Errorf("sqlite: count: %w", err)
	}
	defer release()
	var c store.Counts
	var oldest sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT
	coalesce(sum(status = 1 AND expires_at > ?1), 0), coalesce(sum(status = 1 AND expires_at <= ?1), 0),
	coalesce(sum(status = 2 AND expires_at > ?1), 0), coalesce(sum(status = 2 AND expires_at <= ?1), 0),
	min(CASE WHEN status = 1 AND expires_at > ?1 THEN expires_at END)
FROM `+quoteIdent(s.table), micros(s.now())).Scan(&c.InProgress, &c.Lapsed, &c.Completed, &c.Expired, &oldest)
	if err != nil {
		return store.Counts{}, fmt.Errorf("sqlite: count: %w", err)
	}
	if oldest.Valid {
		c.OldestLease = fromMicros(oldest.Int64)
	}
	return c, nil
}

// Lookup implements store.Inspector.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("sqlite: lookup: %w", err)
	}
	release, err := s.readSlot(ctx)
	if err != nil {
		return store.Entry{}, fmt.Errorf("sqlite: lookup: %w", err)
	}
	defer release()
	now := micros(s.now())
	rows, err := s.db.QueryContext(ctx, `SELECT `+inspectCols+` FROM `+quoteIdent(s.table)+` WHERE key = ?1`, key)
	if err != nil {
		return store.Entry{}, fmt.Errorf("sqlite: lookup: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return store.Entry{}, fmt.Errorf("sqlite: lookup: %w", err)
		}
		return store.Entry{}, fmt.Errorf("sqlite: lookup %q: %w", key, store.ErrNotFound)
	}
	e, err := scanEntry(rows, now)
	if err != nil {
		return store.Entry{}, fmt.Errorf("sqlite: lookup: %w", err)
	}
	return e, rows.Err()
}

// readSlot waits for one of the reads Store allows at once (see
// runner.record) and returns its release.
func (s *Store) readSlot(ctx context.Context) (func(), error) {
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// scanEntry reads a row of inspectCols, at now.
func scanEntry(rows *sql.Rows, now int64) (store.Entry, error) {
	var (
		e             store.Entry
		token         string
		status        int64
		fp, resp      sql.NullInt64
		until, expire int64
		attempt       int64
		fence         int64
	)
	if err := rows.Scan(&e.Key, &token, &status, &fp, &resp, &until, &expire, &attempt, &fence); err != nil {
		return store.Entry{}, err
	}
	st := store.StatusInProgress
	switch status {
	case statusInProgress:
	case statusCompleted:
		st = store.StatusCompleted
	default:
		return store.Entry{}, errors.New("key " + strconv.Quote(e.Key) + ": unknown status " + strconv.FormatInt(status, 10))
	}
	e.State = store.StateOf(st, expire <= now)
	e.TokenHash = store.HashToken(store.Token(token))
	e.FingerprintSize, e.ResponseSize = int(fp.Int64), int(resp.Int64)
	e.ExpiresAt = fromMicros(expire)
	e.Attempt, e.Fence = uint32(attempt), uint64(fence)
	if st == store.StatusInProgress {
		e.LockedUntil = fromMicros(until)
	}
	return e, nil
}

// listQuery returns List's statement and its arguments; ?1 is now.
func (s *Store) listQuery(o store.ListOptions, after store.Position, limit int, now int64) (string, []any) {
	var where []string
	args := []any{now}
	arg := func(v any) string { args = append(args, v); return "?" + strconv.Itoa(len(args)) }
	if st, over, ok := o.State.Split(); ok {
		cmp := " > "
		if over {
			cmp = " <= "
		}
		where = append(where, "status = "+strconv.Itoa(int(st)), "expires_at"+cmp+"?1")
	}
	if !after.ExpiresAt.IsZero() {
		at := arg(micros(after.ExpiresAt))
		where = append(where, "expires_at >= "+at, "(expires_at > "+at+" OR key > "+arg(after.Key)+")")
	}
	if !o.ExpiresBefore.IsZero() {
		where = append(where, "expires_at < "+arg(micros(o.ExpiresBefore)))
	}
	if o.Prefix != "" {
		p := arg(o.Prefix)
		where = append(where, "substr(key, 1, length("+p+")) = "+p)
	}
	q := `SELECT ` + inspectCols + ` FROM ` + quoteIdent(s.table)
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY expires_at, key LIMIT ` + arg(limit+1)
	return q, args // after arg has appended the limit
}
