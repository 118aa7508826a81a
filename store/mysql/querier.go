package mysql

import (
	"context"
	"database/sql"
)

// DBTX is what *sql.DB, *sql.Conn and *sql.Tx have in common to run
// statements.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

var (
	_ DBTX = (*sql.DB)(nil)
	_ DBTX = (*sql.Tx)(nil)
)

// Querier returns the transaction InTx carries in ctx (the request's, in
// httpidem's transactional mode; the message's, in dedup's ProcessTx), and
// db otherwise: the handler runs its statements on what Querier returns, in
// both modes. With httpidem.WithTransactionsIfSupported one handler then
// runs transactionally on a MySQL or MariaDB store and in lease mode on memory://.
//
//	q := mysql.Querier(r.Context(), db)
//	_, err := q.ExecContext(r.Context(), "INSERT INTO payments (amount) VALUES (?)", amount)
func Querier(ctx context.Context, db DBTX) DBTX {
	if tx, ok := TxFrom(ctx); ok {
		return tx
	}
	return db
}
