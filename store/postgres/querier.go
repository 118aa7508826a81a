package postgres

import "context"

// Querier returns the transaction InTx carries in ctx (the request's, in
// httpidem's transactional mode; the message's, in dedup's ProcessTx), and
// db otherwise: the handler runs its statements on what Querier returns, in
// both modes. With httpidem.WithTransactionsIfSupported one handler then
// runs transactionally on a PostgreSQL store, where its writes commit with
// the key and the stored response, and in lease mode on memory:// or Redis
// (in tests, say), where they go to db directly.
//
//	q := postgres.Querier(r.Context(), pool)
//	_, err := q.Exec(r.Context(), "INSERT INTO payments (amount) VALUES ($1)", amount)
//
// Both *pgxpool.Pool and pgx.Tx satisfy DB.
func Querier(ctx context.Context, db DB) DB {
	if tx, ok := TxFrom(ctx); ok {
		return tx
	}
	return db
}
