package nats_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/storetest"
)

// claimJitter is how far the LockedUntil a Claim reports may be before the
// one Get reports: Claim knows only a lower bound of the write's server time
// stamp (the servers' time before the write), Get reads the stamp itself.
// They differ by the write's round trip, a few milliseconds on loopback (an
// R3 write waits for a second server), more on a loaded machine.
const claimJitter = 50 * time.Millisecond

// TestConformance runs the whole suite on the server at IDEMKIT_NATS_URL
// (in CI the Debian package's nats-server, 2.9: no per-key TTL, so
// expired records are removed by Purge), a fresh bucket per subtest.
func TestConformance(t *testing.T) {
	nc := connect(t, natsURL(t))
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: newStore(t, nc)}
		},
		Jitter: claimJitter,
	})
}
