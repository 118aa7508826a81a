package postgres

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/faultcases"
	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/internal/testenv"
)

// proxied returns a Store on its own table whose pool reaches the server
// through a fault proxy, and the proxy.
func proxied(t *testing.T) (*Store, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	p, err := faultproxy.New(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return newTestStore(t, pool), p
}

// The fault cases live in internal/faultcases, shared with the other SQL
// backend; RELIABILITY.md names them by these tests.

func proxiedTx(t *testing.T) (faultcases.TxStore, *faultproxy.Proxy) { return proxied(t) }

// TestLostReplies: the server does the work but the reply never arrives;
// retrying with the same token gives the answer the first call would have.
func TestLostReplies(t *testing.T) { faultcases.LostReplies(t, proxiedTx) }

// TestLostCommitReply: the transaction commits but its reply is lost; the
// retry replays the committed record.
func TestLostCommitReply(t *testing.T) {
	faultcases.LostCommitReply(t, proxiedTx, []byte("commit\x00"), "postgres: commit:") // the COMMIT query, not "begin isolation level read committed"
}

// TestBlackholedServer: a partition does not hang a call past its context.
func TestBlackholedServer(t *testing.T) { faultcases.BlackholedServer(t, proxiedTx) }

// TestConnectionsCutMidTransaction: connections cut inside InTx commit
// nothing and leave the key free.
func TestConnectionsCutMidTransaction(t *testing.T) {
	faultcases.ConnectionsCutMidTransaction(t, proxiedTx)
}
