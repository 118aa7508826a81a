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
