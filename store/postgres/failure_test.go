package postgres

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// requireDriverError: a backend failure is an error that names the
// operation and is none of the sentinels.
func requireDriverError(t *testing.T, err error, op string) {
	t.Helper()
	require.Error(t, err, op)
	require.Contains(t, err.Error(), "postgres: "+op, op)
	for _, sentinel := range []error{store.ErrLeaseLost, store.ErrNotFound, store.ErrInvalid} {
		require.NotErrorIs(t, err, sentinel, op)
	}
}

func exerciseDeadStore(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok := store.NewToken()
	_, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
	requireDriverError(t, err, "claim")
	requireDriverError(t, s.Complete(ctx, "k", tok, []byte("r"), time.Hour), "complete")
	requireDriverError(t, s.Release(ctx, "k", tok), "release")
	_, err = s.Get(ctx, "k")
	requireDriverError(t, err, "get")
	_, err = s.Purge(ctx)
	requireDriverError(t, err, "purge")
	requireDriverError(t, s.Migrate(ctx), "migrate")
	called := false
	err = s.InTx(ctx, func(context.Context, store.Store) error { called = true; return nil })
	requireDriverError(t, err, "begin")
	require.False(t, called)
}

// TestUnreachableServer points a pool at a closed port on loopback (a
// stopped PostgreSQL): every call returns a wrapped driver error, promptly.
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := New(pool)
	require.NoError(t, err)
	exerciseDeadStore(t, s)
}

// TestClosedPool: a pool closed under the Store (a shut-down service) gives
// wrapped errors too, never a panic.
func TestClosedPool(t *testing.T) {
	live := testPool(t)
	pool, err := pgxpool.NewWithConfig(context.Background(), live.Config())
	require.NoError(t, err)
	s, err := New(pool)
	require.NoError(t, err)
	pool.Close()
	exerciseDeadStore(t, s)
}
