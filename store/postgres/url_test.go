package postgres

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/storesmoke"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
)

// testURL returns IDEMKIT_POSTGRES_URL with scheme and extra parameters.
func testURL(t *testing.T, scheme string, params url.Values) string {
	t.Helper()
	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	u.Scheme = scheme
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestOpenURL(t *testing.T) {
	for _, scheme := range []string{"postgres", "postgresql"} {
		t.Run(scheme, func(t *testing.T) {
			table := uniqueName("idemkit_url_")
			schema := uniqueName("idemkit_url_s")
			dropOnCleanup(t, "SCHEMA", quote(schema))
			st, err := store.Open(t.Context(), testURL(t, scheme, url.Values{
				"table": {table}, "schema": {schema}, "purge_batch": {"10"}, "pool_max_conns": {"3"}, "coalesce": {"true"},
			}))
			require.NoError(t, err)
			s, ok := st.(*Store)
			require.True(t, ok, "%T", st)
			assert.Equal(t, quote(schema)+"."+quote(table), s.Table())
			assert.Equal(t, 10, s.opts.purgeBatch)
			assert.NotNil(t, s.batch, "coalesce=true did not turn coalescing on")
			require.NoError(t, store.Migrate(t.Context(), st))
			storesmoke.Run(t, st)
			require.NoError(t, store.Close(st))
			// The Store owned its pool: it is closed now.
			_, err = st.Get(context.Background(), "any")
			require.Error(t, err)
			assert.False(t, errors.Is(err, store.ErrNotFound), "a closed pool still answered: %v", err)
		})
	}
}

func TestOpenURLRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params url.Values
		want   string
	}{
		{"empty table", url.Values{"table": {""}}, "empty table name"},
		{"bad purge batch", url.Values{"purge_batch": {"x"}}, "not an integer"},
		{"zero purge batch", url.Values{"purge_batch": {"0"}}, "WithPurgeBatch(0): pass a positive number"},
		{"bad coalesce", url.Values{"coalesce": {"sometimes"}}, "not true or false"},
		{"bad pgx parameter", url.Values{"pool_max_conns": {"many"}}, "pool_max_conns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(t.Context(), testURL(t, "postgres", tc.params))
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, st)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	// An unknown parameter is refused before it reaches the server.
	st, err := store.Open(t.Context(), testURL(t, "postgres", url.Values{"tabel": {"x"}}))
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.Nil(t, st)
	assert.ErrorContains(t, err, "unknown parameter(s) tabel")
}

// A server that never answers makes Open return when its context ends.
func TestOpenURLUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() }) // accepts nothing: the handshake hangs
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, err := store.Open(ctx, "postgres://u:secret@"+ln.Addr().String()+"/db?sslmode=disable")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, st)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.NotContains(t, err.Error(), "secret")

	cancelled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	_, err = store.Open(cancelled, "postgres://u@"+ln.Addr().String()+"/db")
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, strings.HasPrefix(err.Error(), "store: open "), err.Error())
}
