package main

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// getter finds one payment by id; every ledger is one.
type getter interface {
	get(ctx context.Context, id int64) (payment, bool, error)
}

var (
	_ getter = (*sqliteLedger)(nil)
	_ getter = (*postgresLedger)(nil)
	_ getter = (*memLedger)(nil)
)

// getPayment answers GET /payments/{id}, the Location of a created payment.
func (a *app) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		problem(w, http.StatusNotFound, "No such payment: ids are positive integers.")
		return
	}
	g, ok := a.ledger.(getter)
	if !ok {
		problem(w, http.StatusNotImplemented, "This ledger cannot look payments up.")
		return
	}
	p, found, err := g.get(r.Context(), id)
	switch {
	case err != nil:
		a.logger.ErrorContext(r.Context(), "get payment", "err", err)
		problem(w, http.StatusInternalServerError, "The payment could not be read.")
	case !found:
		problem(w, http.StatusNotFound, "No such payment.")
	default:
		writeJSON(w, http.StatusOK, p)
	}
}

func (l *sqliteLedger) get(ctx context.Context, id int64) (payment, bool, error) {
	var p payment
	err := l.db.QueryRowContext(ctx, `SELECT id, amount FROM `+l.table+` WHERE id = ?`, id).Scan(&p.ID, &p.Amount)
	if errors.Is(err, sql.ErrNoRows) {
		return payment{}, false, nil
	}
	return p, err == nil, err
}

func (l *postgresLedger) get(ctx context.Context, id int64) (payment, bool, error) {
	var p payment
	err := l.pool.QueryRow(ctx, `SELECT id, amount FROM `+l.table+` WHERE id = $1`, id).Scan(&p.ID, &p.Amount)
	if errors.Is(err, pgx.ErrNoRows) {
		return payment{}, false, nil
	}
	return p, err == nil, err
}

func (l *memLedger) get(_ context.Context, id int64) (payment, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id < 1 || id > int64(len(l.payments)) {
		return payment{}, false, nil
	}
	return l.payments[id-1], true, nil
}
