package spanner

import (
	"context"
	"os"
	"sync"
)

// The Cloud Spanner emulator runs one read-write transaction (or schema
// change) per database at a time, and with the client's multiplexed
// sessions it drops the older of two overlapping transactions when the
// newer one begins: under concurrency the transactions keep killing each
// other, and a transaction of InTx could lose its Claim after fn saw it.
// So when SPANNER_EMULATOR_HOST is set (the client then talks to the
// emulator: no TLS, no credentials), every Store in the process runs its
// read-write transactions and schema changes on one database one at a
// time, through that database's gate, waiting for it within ctx. Against
// Spanner itself there is no gate: Spanner's locks order the transactions.
var gates = struct {
	sync.Mutex
	byDB map[string]chan struct{}
}{byDB: map[string]chan struct{}{}}

// emulated reports whether the client talks to the emulator.
func emulated() bool { return os.Getenv("SPANNER_EMULATOR_HOST") != "" }

// gate returns the gate of database db, or nil against Spanner itself.
func gate(db string) chan struct{} {
	if !emulated() {
		return nil
	}
	gates.Lock()
	defer gates.Unlock()
	g := gates.byDB[db]
	if g == nil {
		g = make(chan struct{}, 1)
		gates.byDB[db] = g
	}
	return g
}

// enter waits for the Store's gate (when it has one) and returns the
// function that leaves it, or ctx's error.
func (s *Store) enter(ctx context.Context) (leave func(), err error) {
	g := s.gate
	if g == nil {
		return func() {}, nil
	}
	select {
	case g <- struct{}{}:
		return func() { <-g }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
