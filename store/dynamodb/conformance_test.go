package dynamodb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/dynamodb"
	"github.com/idemkit/idemkit/storetest"
)

// skipUnsupported skips, before a table is made for them, the cases of the
// suite this backend does not take, for the reasons the package
// documentation gives: the one case it cannot pass, and the Transactor
// group (which would skip itself: the Store is no store.Transactor).
func skipUnsupported(t *testing.T) {
	switch {
	case strings.HasSuffix(t.Name(), "/Strings/ResponseSeveralMiB"):
		t.Skipf("DynamoDB items stop at 400 KB: a response over MaxResponseLen (%d bytes) is store.ErrInvalid (TestCompleteTooLarge)", dynamodb.MaxResponseLen)
	case strings.Contains(t.Name(), "/Transactor/"):
		t.Skip("store does not implement store.Transactor (see the package documentation)")
	}
}

// TestConformance runs the whole suite on a table of its own per case, on
// a manual clock with the default skew allowance: a lease or retention is
// over one DefaultClockSkew after its deadline, so the suite's Tolerance is
// twice that. On dynalite every refused write is explained by the GetItem
// fallback.
func TestConformance(t *testing.T) {
	c := localClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			skipUnsupported(t)
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
// Store's own GetItem. The Claim races, the slowest cases, are left to
// TestConformance: the wrapper reads the item after the refusal, so it
// cannot show the real thing's atomicity anyway.
func TestConformanceReturnedItem(t *testing.T) {
	c := localClient(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			skipUnsupported(t)
			if strings.Contains(t.Name(), "/Claim/Concurrent") {
				t.Skip("the Claim races run in TestConformance")
			}
			w := wrap(c)
			w.withOld = true
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			return storetest.Subject{Store: newTable(t, w, dynamodb.WithClock(clock.Now)), Clock: clock}
		},
		Tolerance: 2 * dynamodb.DefaultClockSkew,
	})
}
