package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/internal/testredis"
)

// urlCases are the -store-url values the demo is run with: one per backend
// and the Redis Cluster, each isolated (own file, tables or key prefix).
func urlCases() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"memory": func(t *testing.T) string { return "memory://" },
		"sqlite": func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "keys.db") },
		"postgres": func(t *testing.T) string {
			u, err := url.Parse(testenv.PostgresURL(t))
			require.NoError(t, err)
			table := "idemkit_url_demo_" + strings.ToLower(rand.Text()[:10])
			q := u.Query()
			q.Set("table", table)
			u.RawQuery = q.Encode()
			t.Cleanup(func() {
				pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
				if err != nil {
					t.Errorf("cleanup: %v", err)
					return
				}
				defer pool.Close()
				_, err = pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`", "`+table+`_payments"`)
				assert.NoError(t, err, "cleanup")
			})
			return u.String()
		},
		"mysql": func(t *testing.T) string {
			dsn := testenv.MySQLDSN(t)
			table := "idemkit_url_demo_" + strings.ToLower(rand.Text()[:10])
			u, err := mysqlStoreURL(dsn, table)
			require.NoError(t, err)
			t.Cleanup(func() {
				db, err := sql.Open("mysql", dsn)
				if err != nil {
					t.Errorf("cleanup: %v", err)
					return
				}
				defer db.Close()
				_, err = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`, `"+table+"_payments`")
				assert.NoError(t, err, "cleanup")
			})
			return u
		},
		"redis": func(t *testing.T) string {
			c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
			t.Cleanup(func() { c.Close() })
			return "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + url.QueryEscape(testredis.Prefix(t, c, "payments-url-test:"))
		},
		"cluster": func(t *testing.T) string {
			addrs := testenv.RedisClusterAddrs(t)
			c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { c.Close() })
			return "redis+cluster://" + strings.Join(addrs, ",") + "/?prefix=" + url.QueryEscape(testredis.Prefix(t, c, "payments-url-test:"))
		},
	}
}

// TestEveryStoreURL runs the seeds' exercise on every backend, each chosen
// only by the -store-url flag: the same code opens, migrates and closes the
// store whatever it is.
func TestEveryStoreURL(t *testing.T) {
	for name, storeURL := range urlCases() {
		t.Run(name, func(t *testing.T) {
			raw := storeURL(t)
			table := "payments"
			if u, _ := url.Parse(raw); u.Query().Get("table") != "" {
				table = u.Query().Get("table") + "_payments"
			}
			c, addr, err := parseArgs([]string{"-store-url", raw, "-wait", "5s"})
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1:3000", addr, "loopback by default")
			c.PaymentsTable = table
			d := startDemo(t, c)
			assert.NotContains(t, d.app.describe, "xxxxx", "no password in these URLs")

			// Ten clients retry one payment at once: one payment, nine replays.
			key := newKey()
			results := make([]result, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = d.post(key, `{"amount":1990}`) })
			}
			wg.Wait()
			replays := 0
			for _, r := range results {
				require.Equal(t, http.StatusCreated, r.status, "body %s", r.body)
				assert.Equal(t, results[0].payment, r.payment)
				assert.Equal(t, results[0].header.Get("Location"), r.header.Get("Location"))
				if r.replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, d.count())

			// The Location answers with the payment.
			loc := results[0].header.Get("Location")
			require.NotEmpty(t, loc)
			resp, err := d.srv.Client().Get(d.srv.URL + loc)
			require.NoError(t, err)
			var got payment
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, results[0].payment, got)

			// The same key with another amount: 422, still one payment.
			assert.Equal(t, http.StatusUnprocessableEntity, d.post(key, `{"amount":5}`).status)
			// Another key: a second payment.
			second := d.post(newKey(), `{"amount":700}`)
			require.Equal(t, http.StatusCreated, second.status)
			assert.False(t, second.replayed)
			assert.NotEqual(t, results[0].payment.ID, second.payment.ID)
			assert.Equal(t, 2, d.count())
		})
	}
}

func TestStoreURLFlags(t *testing.T) {
	_, addr, err := parseArgs([]string{"-addr", ":3000"})
	require.NoError(t, err)
	assert.Equal(t, ":3000", addr, "-addr opens the demo to every interface")
	c, _, err := parseArgs(nil)
	require.NoError(t, err)
	u, err := c.storeURL()
	require.NoError(t, err)
	assert.Equal(t, "sqlite:payments.db", u, "the default is the shorthand -store sqlite -db payments.db")
	_, _, err = parseArgs([]string{"stray"})
	assert.ErrorContains(t, err, "unexpected arguments")

	c.StoreURL = "mongodb://localhost"
	_, err = open(t.Context(), c, nil)
	assert.ErrorContains(t, err, `unknown URL scheme "mongodb"`)
	c.StoreURL = "memory://?tabel=x"
	_, err = open(t.Context(), c, nil)
	assert.ErrorContains(t, err, "unknown parameter(s) tabel")
}

func TestGetPayment(t *testing.T) {
	d := startDemo(t, storeCases()[1].cfg(t)) // memory
	for _, path := range []string{"/payments/1", "/payments/0", "/payments/x", "/payments/99999999999999999999"} {
		resp, err := d.srv.Client().Get(d.srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	r := d.post(newKey(), `{"amount":1990}`)
	require.Equal(t, http.StatusCreated, r.status)
	assert.Equal(t, "/payments/1", r.header.Get("Location"))
	resp, err := d.srv.Client().Get(d.srv.URL + "/payments/1")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// The demo accepts bodies up to the 1 MiB the README promises, and answers
// 413 beyond.
func TestBodyLimit(t *testing.T) {
	d := startDemo(t, storeCases()[1].cfg(t)) // memory
	pad := func(n int) string { return `{"amount":1990,"note":"` + strings.Repeat("x", n) + `"}` }
	// 100 KiB: over the old 64 KiB limit, under 1 MiB. The handler rejects
	// the unknown field with a 400, after the fingerprint accepted the body.
	r := d.post(newKey(), pad(100<<10))
	assert.Equal(t, http.StatusBadRequest, r.status, r.body)
	r = d.post(newKey(), pad(maxBody))
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.body)
}
