package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// largeResponse is the size from which Complete hands the response to the
// wire protocol itself instead of to pgx's argument encoding, which copies
// a bytea into a buffer of its own before the message buffer copies it
// again: a 64 MiB response cost 128 MiB of allocations that way, and costs
// 64 MiB (the message) this way. Below it, the parse this path costs on the
// server (it sends an unnamed statement) outweighs a copy.
const largeResponse = 1 << 20

// completeWire runs the complete statement on the connection underneath db
// with the response as the Bind message's parameter, uncopied. ok is false,
// and nothing ran, when db gives no access to its connection (a DB of the
// caller's own making): Complete then runs the statement through pgx as
// usual. The statement goes around pgx's query tracer.
func completeWire(ctx context.Context, db DB, query, key, token string, response []byte, retention pgtype.Interval) (tag pgconn.CommandTag, ok bool, err error) {
	var conn *pgx.Conn
	switch db := db.(type) {
	case interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
	}: // *pgxpool.Pool
		c, err := db.Acquire(ctx)
		if err != nil {
			return tag, true, err
		}
		defer c.Release()
		conn = c.Conn()
	case interface{ Conn() *pgx.Conn }: // pgx.Tx, *pgxpool.Conn
		conn = db.Conn()
	case *pgx.Conn:
		conn = db
	}
	if conn == nil {
		return tag, false, nil
	}
	iv, err := conn.TypeMap().Encode(pgtype.IntervalOID, pgtype.BinaryFormatCode, retention, nil)
	if err != nil {
		return tag, true, err
	}
	// The binary format of text is its bytes, and of bytea the bytes
	// themselves: only the interval needs encoding.
	tag, err = conn.PgConn().ExecParams(ctx, query,
		[][]byte{[]byte(key), []byte(token), response, iv},
		[]uint32{pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, pgtype.IntervalOID},
		[]int16{pgtype.BinaryFormatCode}, nil).Close()
	return tag, true, err
}
