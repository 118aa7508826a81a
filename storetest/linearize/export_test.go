package linearize

import (
	"testing"

	"github.com/idemkit/idemkit/store"
)

// CheckForTest runs the check on s and returns its failure report, "" when
// every history had an order.
func CheckForTest(t *testing.T, s store.Store, h Harness) string {
	_, _, _, report := check(t.Context(), s, h.withDefaults(), 1)
	return report
}
