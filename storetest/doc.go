// Package storetest is the conformance suite for idemkit stores. Every
// backend in this module runs it from its own tests, and so can a backend
// written anywhere else:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T) storetest.Subject {
//				clock := storetest.NewManualClock(time.Now())
//				s := mystore.New(mystore.WithClock(clock.Now))
//				t.Cleanup(func() { s.Close() })
//				return storetest.Subject{Store: s, Clock: clock}
//			},
//		})
//	}
//
// Run it with the race detector (go test -race): several cases race real
// goroutines, and some defects show only under it.
//
// Run checks every row of the state machine documented in package store and
// the rules under it, each in a subtest with a readable name
// (Claim/ConcurrentSameKey, Complete/OtherTokenInProgress,
// Fencing/CompleteAfterTakeover, ...) so a failure says which rule broke.
// The groups:
//
//   - Claim, Complete, Release, Get: every row of the table, and atomicity
//     raced with real goroutines over fresh keys and over every state a
//     takeover starts from (a lapsed lease, a record past its retention, a
//     released key), and Get during writes (Get/ConcurrentWithWrites: whole
//     records, never torn across generations).
//   - Fencing: a lapsed holder's Complete and Release, in sequence and raced
//     against a takeover, never touch the new holder's record.
//   - Expiry: leases and retentions last as long as asked, from under a
//     millisecond (Expiry/SubMillisecondDurations) to over a year
//     (Expiry/LongDurations); renewals count; a record is absent from the
//     instant of its ExpiresAt on (Expiry/Boundary, with a Clock).
//   - Strings: keys, fingerprints, tokens and responses in the shapes
//     storage engines mangle (case, spaces, Unicode forms, long prefixes,
//     every byte value, 4 MiB) stay distinct and byte-exact. A store that
//     finds keys by a hash must compare whole keys or whole hashes of at
//     least 128 bits: no test can find a colliding pair (see
//     Strings/KeysLongPrefix).
//   - Errors: invalid arguments to every method, and ended contexts.
//   - Purger, Transactor: the optional interfaces, tested when the store
//     implements them and skipped otherwise. The cases about the caller's
//     own writes need Subject.Effect and Subject.CountEffects.
//   - Model: random sequences against a reference model of the contract.
//
// Deadlines are compared within Harness.Tolerance and Harness.Jitter, so a
// store that derives them from a TTL passes. RunBenchmarks measures any
// backend with the benchmarks this module's backends run. Package
// storetest/linearize adds a check of concurrent histories under lost
// replies, timeouts and retries.
//
// A data race the runtime itself stops ("fatal error: concurrent map read
// and map write") ends the test binary before any subtest can fail; its
// stack names the case: the goroutines of Get/ConcurrentWithWrites run in
// getConcurrentWithWrites, those of the Claim races in concurrentClaims
// and concurrentClaimsOver, those of the Fencing races in raceStale.
//
// The suite imports only the standard library, so a third-party backend
// inherits no test dependency.
package storetest
