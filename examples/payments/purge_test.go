package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store/mysql"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/sqlite"
)

// keyRows counts the rows of the demo's key table, on disk: the purge must
// delete them, not only hide them.
func keyRows(t *testing.T, a *app) int {
	t.Helper()
	var n int
	switch s := a.store.(type) {
	case *sqlite.Store:
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM "+s.Table()).Scan(&n))
	case *mysql.Store:
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM "+s.Table()).Scan(&n))
	case *postgres.Store:
		pool, ok := s.DB().(*pgxpool.Pool)
		require.True(t, ok)
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+s.Table()).Scan(&n))
	default:
		t.Fatalf("no row count for %T", a.store)
	}
	return n
}

// The demo's cleanup job deletes keys past -retention from the store's
// table, and stops with the demo (the package's leak check sees to it).
func TestDemoPurgesExpiredKeys(t *testing.T) {
	for _, sc := range storeCases() {
		if !sc.tx {
			continue // rows are counted on the SQL stores; memory sweeps by itself too, Redis expires keys
		}
		t.Run(sc.name, func(t *testing.T) {
			c := sc.cfg(t)
			c.Retention, c.PurgeEvery = 300*time.Millisecond, 50*time.Millisecond
			runs := make(chan purge.Result, 64)
			c.purge = func(_ context.Context, r purge.Result) {
				select {
				case runs <- r:
				default:
				}
			}
			a, err := open(t.Context(), c, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			stop := a.startPurge(context.Background())
			srv := httptest.NewServer(a.routes())
			t.Cleanup(func() {
				srv.Close()
				stop()
				a.close()
			})
			d := &demo{t: t, app: a, srv: srv}

			key := newKey()
			first := d.post(key, `{"amount":1990}`)
			require.Equal(t, 201, first.status)
			require.True(t, d.post(key, `{"amount":1990}`).replayed, "within retention the key replays")
			require.Equal(t, 1, keyRows(t, a))

			deadline := time.After(20 * time.Second)
			for deleted := int64(0); deleted == 0; {
				select {
				case r := <-runs:
					// A run that reaches its timeout (the 50 ms interval, on a
					// loaded machine) stops between batches and the next one
					// goes on where it stopped, as purge documents; any other
					// error fails.
					if !errors.Is(r.Err, context.DeadlineExceeded) {
						require.NoError(t, r.Err)
					}
					deleted += r.Deleted
				case <-deadline:
					t.Fatal("the cleanup job deleted nothing in 20s")
				}
			}
			assert.Equal(t, 0, keyRows(t, a), "the expired key's row is gone from the table")
			again := d.post(key, `{"amount":1990}`)
			require.Equal(t, 201, again.status)
			assert.False(t, again.replayed, "past retention the key is forgotten: a new payment")
			assert.NotEqual(t, first.payment.ID, again.payment.ID)
		})
	}
}

func TestPurgeFlags(t *testing.T) {
	c, _, err := parseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, c.PurgeEvery, "default -purge-every")
	assert.Equal(t, 24*time.Hour, c.Retention, "default -retention")
	c, _, err = parseArgs([]string{"-purge-every", "0", "-retention", "1h"})
	require.NoError(t, err)
	assert.Zero(t, c.PurgeEvery)
	assert.Equal(t, time.Hour, c.Retention)
	_, _, err = parseArgs([]string{"-purge-every", "-1s"})
	assert.ErrorContains(t, err, "-purge-every -1s is negative")
	_, _, err = parseArgs([]string{"-retention", "0s"})
	assert.ErrorContains(t, err, "-retention 0s is not positive")
}

// With -purge-every 0 no job starts; a started job runs at once and, once
// stopped, never again.
func TestPurgeDisabled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"Off", 0}, {"OnThenStopped", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			c := storeCases()[0].cfg(t)
			c.PurgeEvery = tc.every
			ran := make(chan struct{}, 1)
			c.purge = func(context.Context, purge.Result) { ran <- struct{}{} }
			a, err := open(t.Context(), c, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			stop := a.startPurge(context.Background())
			if tc.every > 0 {
				<-ran // the first run starts at once
			}
			stop()
			a.close()
			select {
			case <-ran:
				t.Fatal("a purge ran after stop, or with purging off")
			default:
			}
		})
	}
}

// The demo's log handler hashes any raw key and leaves keys idemkit already
// hashed as they are.
func TestLogHandlerRedacts(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(logHandler(slog.NewJSONHandler(&buf, nil)))
	raw := "alice|client-key-Zk41"
	hashed := keyer.DefaultRedactor()("already")
	logger.Info("raw", "key", raw)
	logger.Info("hashed", "key", hashed)
	logger.With("key", raw).Info("with")
	out := buf.String()
	assert.NotContains(t, out, "client-key-Zk41")
	assert.Equal(t, 2, strings.Count(out, keyer.DefaultRedactor()(raw)), out)
	assert.Contains(t, out, `"key":"`+hashed+`"`, "a hashed key is not hashed twice")
}
