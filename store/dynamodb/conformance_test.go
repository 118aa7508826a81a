package dynamodb_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/dynamodb"
	"github.com/idemkit/idemkit/storetest"
)

// TestConformance runs the whole suite on a table of its own per case, on
// a manual clock with the default skew allowance: a lease or retention is
// over one DefaultClockSkew after its deadline, so the suite's Tolerance is
// twice that. Strings/ResponseSeveralMiB is skipped (see main_test.go).
func TestConformance(t *testing.T) {
	c := localClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			return storetest.Subject{Store: newTable(t, c, dynamodb.WithClock(clock.Now)), Clock: clock}
		},
		Tolerance: 2 * dynamodb.DefaultClockSkew,
	})
}

// TestConformanceReturnedItem runs the suite again with the item of a
// refused write handed back as DynamoDB's
// ReturnValuesOnConditionCheckFailure does (dynalite has no such thing), so
// that every row is also decided from a returned item, without the
// Store's own GetItem.
func TestConformanceReturnedItem(t *testing.T) {
	c := localClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			w := wrap(c)
			w.withOld = true
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			return storetest.Subject{Store: newTable(t, w, dynamodb.WithClock(clock.Now)), Clock: clock}
		},
		Tolerance: 2 * dynamodb.DefaultClockSkew,
	})
}
