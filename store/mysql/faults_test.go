package mysql

import (
	"database/sql"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/faultcases"
	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/internal/testenv"
)

// proxied returns a Store on its own table whose pool reaches the server
// through a fault proxy, and the proxy.
func proxied(t *testing.T) (*Store, *faultproxy.Proxy) {
	t.Helper()
	testDB(t) // skips without the DSN
	cfg, err := gomysql.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	p, err := faultproxy.New(cfg.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	cfg.Addr = p.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	return newTestStore(t, db), p
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
	faultcases.LostCommitReply(t, proxiedTx, []byte("COMMIT"), "mysql: commit:")
}

// TestBlackholedServer: a partition does not hang a call past its context.
func TestBlackholedServer(t *testing.T) { faultcases.BlackholedServer(t, proxiedTx) }

// TestConnectionsCutMidTransaction: connections cut inside InTx commit
// nothing and leave the key free.
func TestConnectionsCutMidTransaction(t *testing.T) {
	faultcases.ConnectionsCutMidTransaction(t, proxiedTx)
}
