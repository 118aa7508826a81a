package spanner

import (
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/storetest"
)

// TestConformance runs the whole storetest suite, each subtest on its own
// table, on the server's clock: the cases that wait for a lease to lapse
// sleep for Harness.ShortLease and a margin. A subtest's second store (the
// cases about another store) is on a second database, as another store
// would be on Spanner: the emulator runs one transaction per database at a
// time, so two stores of one database cannot hold two at once.
func TestConformance(t *testing.T) {
	var mu sync.Mutex
	made := map[*testing.T]bool{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			mu.Lock()
			again := made[t]
			made[t] = true
			mu.Unlock()
			if again {
				_, client := second.get(t)
				return subject(newStoreOn(t, client))
			}
			return subject(newTestStore(t))
		},
		ShortLease: 600 * time.Millisecond,
	})
}
