package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// backend is one store the cross-backend tests run on. Adding a backend is
// one line in backends.
type backend struct {
	name string
	// new returns a fresh, isolated store and its clock (nil: real clock).
	new func(t testing.TB) storetest.Subject
	// tx returns an effect table written through the store's transaction,
	// for the ProcessTx tests; nil when the store is not a store.Transactor.
	tx func(t testing.TB, subj storetest.Subject) txEffect
}

// txEffect is a table of effects written inside the store's transaction.
type txEffect struct {
	// apply writes one row for id through the transaction found in ctx.
	apply func(ctx context.Context, id string) error
	// count returns the number of committed rows for id.
	count func(t testing.TB, id string) int
}

var backends = []backend{
	{name: "memory", new: newMemory},
	{name: "memory-realclock", new: newMemoryRealClock},
	{name: "sqlite", new: newSQLite, tx: sqliteEffects},
	{name: "postgres", new: newPostgres, tx: postgresEffects},
	{name: "miniredis", new: newMiniredis},
	{name: "redis", new: newRedis},
	{name: "redis-cluster", new: newRedisCluster},
}

func newMemory(t testing.TB) storetest.Subject {
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := mustMemory(t, memory.WithClock(clock.Now))
	t.Cleanup(func() { _ = s.Close() })
	return storetest.Subject{Store: s, Clock: clock}
}

// newMemoryRealClock runs the real-time paths (leases waited for, not
// advanced) without a server.
func newMemoryRealClock(t testing.TB) storetest.Subject {
	s := mustMemory(t)
	t.Cleanup(func() { _ = s.Close() })
	return storetest.Subject{Store: s}
}

// forEach runs test on every backend.
func forEach(t *testing.T, test func(t *testing.T, b backend, subj storetest.Subject)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			test(t, b, b.new(t))
		})
	}
}

// forEachTx runs test on every backend that implements store.Transactor.
func forEachTx(t *testing.T, test func(t *testing.T, subj storetest.Subject, fx txEffect)) {
	t.Helper()
	for _, b := range backends {
		if b.tx == nil {
			continue // not a store.Transactor
		}
		t.Run(b.name, func(t *testing.T) {
			subj := b.new(t)
			if _, ok := subj.Store.(store.Transactor); !ok {
				t.Fatalf("%s has an effect table but its store is not a store.Transactor", b.name)
			}
			test(t, subj, b.tx(t, subj))
		})
	}
}
