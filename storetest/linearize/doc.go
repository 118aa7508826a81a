// Package linearize checks that a store.Store is linearizable under the
// faults that hurt idempotency most: lost replies (the call took effect,
// the caller saw an error), timeouts (the caller gave up, the call went
// on), deadlines that cut calls short, and the retries that follow them
// with the same token. A backend runs it beside storetest.Run:
//
//	func TestLinearizable(t *testing.T) {
//		linearize.Run(t, linearize.Harness{
//			New: func(t *testing.T) store.Store { return newStore(t) },
//		})
//	}
//
// Run records, from many goroutines, histories of Claim, Complete, Release,
// Renew and Get on a few keys, each call with the time it was made and the time
// it returned, and checks each key's history against the table in package
// store's documentation: there must be one order of the calls, each placed
// at an instant between its call and its return, that the table explains
// call by call. A call whose outcome its caller never saw may be placed at
// any instant after it was made, or nowhere. Keys are independent, so each
// key's history is checked alone (Wing and Gong's search, with Lowe's
// memoisation of the calls placed and the state they leave); a store that
// fails gets the shortest history found with no such order, one call a
// line.
//
// Time is kept out of it: leases and retentions last an hour and nothing
// moves a store's clock, so no record expires while a history is recorded.
// The storetest suite checks expiry.
//
// The checker is this package's own, in the standard library only, so
// importing it adds no dependency.
package linearize
