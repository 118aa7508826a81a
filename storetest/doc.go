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
// Run checks every row of the state machine documented in package store and
// the rules under it, each in a subtest with a readable name
// (Claim/ConcurrentSameKey, Complete/OtherToken, Fencing/CompleteAfterTakeover,
// ...) so a failure says which rule broke. Optional interfaces (store.Purger,
// store.Transactor) are tested when the store implements them and skipped
// otherwise.
//
// The suite imports only the standard library, so a third-party backend
// inherits no test dependency.
package storetest
