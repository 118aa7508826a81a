package httpidemtest_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// TestMain fails the run if a server, proxy or request goroutine outlives
// the tests.
func TestMain(m *testing.M) { leakcheck.Main(m) }
