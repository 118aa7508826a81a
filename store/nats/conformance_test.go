package nats_test

import (
	"testing"

	"github.com/idemkit/idemkit/storetest"
)

// TestConformance runs the whole suite on the server at IDEMKIT_NATS_URL
// (in CI the Debian package's nats-server, 2.9: no per-key TTL, so
// expired records are removed by Purge), a fresh bucket per subtest.
func TestConformance(t *testing.T) {
	nc := connect(t, natsURL(t))
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: newStore(t, nc)}
		},
	})
}
