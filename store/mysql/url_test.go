package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// testURL turns the test DSN (user@tcp(host:port)/db) into a mysql:// URL.
func testURL(t *testing.T) string {
	t.Helper()
	testDB(t) // skips without the DSN
	cfg, err := gomysql.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	u := "mysql://" + cfg.User
	if cfg.Passwd != "" {
		u += ":" + cfg.Passwd
	}
	return u + "@" + cfg.Addr + "/" + cfg.DBName
}

// TestOpenURL: store.Open makes a working Store that owns its *sql.DB, and
// passes driver parameters through.
func TestOpenURL(t *testing.T) {
	table := uniqueName("idemkit_my_url_")
	s, err := store.Open(t.Context(), testURL(t)+"?table="+table+"&purge_batch=10&timeout=5s&var.tx_isolation=%27READ-COMMITTED%27")
	require.NoError(t, err)
	ms := s.(*Store)
	dropOnCleanup(t, ms)
	assert.Equal(t, "`"+table+"`", ms.Table())
	assert.Equal(t, 10, ms.opts.purgeBatch)
	require.NoError(t, store.Migrate(t.Context(), s))
	c, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, c.Outcome)
	require.NoError(t, store.Close(s))
	require.NoError(t, store.Close(s), "Close twice")
	assert.Error(t, ms.DB().PingContext(t.Context()), "Close closed the *sql.DB store.Open made")
}

// TestOpenURLErrors: bad URLs and options fail with ErrInvalid before
// connecting; an unreachable server fails at Open.
func TestOpenURLErrors(t *testing.T) {
	for _, u := range []string{
		"mysql:///test",
		"mysql://root@127.0.0.1/test?table=",
		"mysql://root@127.0.0.1/test?purge_batch=x",
		"mysql://root@127.0.0.1/test?table=" + strings.Repeat("t", 49),
	} {
		_, err := store.Open(t.Context(), u)
		assert.ErrorIs(t, err, store.ErrInvalid, u)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "mariadb://root@127.0.0.1:1/test?timeout=1s")
	assert.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrInvalid)
}
