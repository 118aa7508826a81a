package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/loadtest"
)

// TestLoad runs the load test (cmd/idemload's engine) in a short mode against
// the demo on every store: concurrent clients, retries of earlier keys (some
// while the original is in flight), then one payment per distinct key and
// every retry answered with the original payment.
func TestLoad(t *testing.T) {
	keys := 150
	if testing.Short() {
		keys = 40
	}
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			d := startDemo(t, sc.cfg(t))
			client := *d.srv.Client() // closed with the server: no idle connections left behind
			client.Timeout = 10 * time.Second
			rep, err := loadtest.Run(t.Context(), loadtest.Config{
				URL:      d.srv.URL,
				Client:   &client,
				Clients:  8,
				Keys:     keys,
				Duration: 5 * time.Second,
			})
			require.NoError(t, err)
			t.Logf("%s:\n%s", sc.name, rep)
			require.True(t, rep.OK(), "invariants broken:\n%s", rep)
			require.Positive(t, rep.Keys)
			require.Equal(t, rep.Keys, rep.Payments, "one payment per distinct key")
			require.Equal(t, rep.Payments, d.count(), "the demo's own count agrees")
		})
	}
}
