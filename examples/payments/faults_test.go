package main

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/faultproxy"
)

// The fault tests put a faultproxy between the demo and its store and break
// the connection at chosen moments; they check what the HTTP client sees and
// that no payment is lost or made twice.

// proxiedPostgres is the demo's PostgreSQL config (own tables) with the
// connection going through a fault proxy.
func proxiedPostgres(t *testing.T) (config, *faultproxy.Proxy) {
	t.Helper()
	c := storeCases()[2].cfg(t)
	require.Equal(t, "postgres", c.Store)
	u, err := url.Parse(c.PostgresURL)
	require.NoError(t, err)
	p, err := faultproxy.New(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	c.PostgresURL = u.String()
	return c, p
}

// proxiedRedis is the demo's Redis config (own prefix) through a fault proxy.
func proxiedRedis(t *testing.T) (config, *faultproxy.Proxy) {
	t.Helper()
	c := storeCases()[3].cfg(t)
	require.Equal(t, "redis", c.Store)
	p, err := faultproxy.New(c.RedisAddr)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	c.RedisAddr = p.Addr()
	return c, p
}

// countRuns makes the demo count how often the payment handler runs.
func countRuns(d *demo) *atomic.Int32 {
	var n atomic.Int32
	d.app.beforeCreate = func(context.Context) error {
		n.Add(1)
		return nil
	}
	return &n
}

// postPast503 retries while the answer is 503, as a client told "Retry with
// the same key" would, a few times at most.
func postPast503(d *demo, key, body string) result {
	d.t.Helper()
	var r result
	for range 5 {
		if r = d.post(key, body); r.status != http.StatusServiceUnavailable {
			return r
		}
	}
	return r
}

// TestStoreUnreachable: the store refuses connections when the request
// arrives → 503 problem+json, the handler does not run; once the store is
// back the same key pays once.
func TestStoreUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (config, *faultproxy.Proxy)
	}{{"postgres", proxiedPostgres}, {"redis", proxiedRedis}} {
		t.Run(tc.name, func(t *testing.T) {
			c, p := tc.setup(t)
			c.Wait = 0
			d := startDemo(t, c)
			runs := countRuns(d)
			key, body := newKey(), `{"amount":1990}`

			p.SetRefuse(true)
			p.CutAll()
			r := d.post(key, body)
			assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
			assert.Equal(t, httpidem.ProblemContentType, r.header.Get("Content-Type"))
			assert.Contains(t, r.body, httpidem.CodeStoreUnavailable)
			assert.Zero(t, runs.Load(), "the handler did not run")

			p.SetRefuse(false)
			r = postPast503(d, key, body)
			require.Equal(t, http.StatusCreated, r.status, r.body)
			assert.False(t, r.replayed, "nothing was stored during the outage: the request runs now")
			again := d.post(key, body)
			require.Equal(t, http.StatusCreated, again.status, again.body)
			assert.True(t, again.replayed)
			assert.Equal(t, r.payment, again.payment)
			assert.Equal(t, 1, d.count(), "exactly one payment")
		})
	}
}

// TestLostCommitReply: PostgreSQL commits the payment and the key, but the
// reply to COMMIT never reaches the demo. The client gets an error; its
// retry gets the stored response.
func TestLostCommitReply(t *testing.T) {
	c, p := proxiedPostgres(t)
	d := startDemo(t, c)
	runs := countRuns(d)
	key, body := newKey(), `{"amount":1990}`

	// pgx sends tx.Commit as the simple query "commit": a Query message,
	// 'Q', its length (4+7) and the NUL-terminated text. The bare word would
	// match BEGIN's "isolation level read committed" first.
	p.LoseReplyTo([]byte("Q\x00\x00\x00\x0bcommit\x00"))
	r := d.post(key, body)
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "the commit's outcome is unknown to the demo: %s", r.body)
	assert.Equal(t, httpidem.ProblemContentType, r.header.Get("Content-Type"))
	assert.Equal(t, int32(1), runs.Load())

	again := d.post(key, body)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.True(t, again.replayed, "the commit happened: the retry replays it")
	assert.Equal(t, int32(1), runs.Load(), "the handler did not run again")
	ps := listPayments(t, d)
	require.Len(t, ps, 1, "exactly one payment")
	assert.Equal(t, ps[0], again.payment, "the replayed id is the committed payment's")
}

func listPayments(t *testing.T, d *demo) []payment {
	t.Helper()
	ps, err := d.app.ledger.list(t.Context())
	require.NoError(t, err)
	return ps
}

// TestSlowStore: every Redis round trip takes longer than the lease (the
// proxy delays each chunk by 300ms each way, the lease is 200ms), so the
// lease a claim returns may already have lapsed. What the caller sees: 503
// problem+json (idempotency-store-unavailable) and the payment is not made;
// once the store is fast again the same key pays exactly once. (Before the
// middleware checked the claim's round trip, the first request answered 201
// and its retry paid a second time.)
func TestSlowStore(t *testing.T) {
	c, p := proxiedRedis(t)
	c.Wait = 0
	c.extra = []idem.Option{idem.WithLease(200 * time.Millisecond)}
	d := startDemo(t, c)
	runs := countRuns(d)
	key, body := newKey(), `{"amount":1990}`

	p.SetDelay(300 * time.Millisecond)
	first := d.post(key, body)
	p.SetDelay(0)
	assert.Equal(t, http.StatusServiceUnavailable, first.status, first.body)
	assert.Equal(t, httpidem.ProblemContentType, first.header.Get("Content-Type"))
	assert.Contains(t, first.body, httpidem.CodeStoreUnavailable)
	assert.Zero(t, runs.Load(), "the handler did not run on a lease that may have lapsed")

	retry := d.post(key, body)
	require.Equal(t, http.StatusCreated, retry.status, retry.body)
	again := d.post(key, body)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.True(t, again.replayed)
	assert.Equal(t, retry.payment, again.payment)
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, 1, d.count(), "no double effect")
}
