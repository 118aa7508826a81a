package idem_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// Heartbeats must all be gone after the tests.
func TestMain(m *testing.M) { leakcheck.Main(m) }
