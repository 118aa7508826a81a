package redis_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// TestMain fails the run if a test leaves goroutines behind (a client, a
// miniredis or a proxy not closed).
func TestMain(m *testing.M) { leakcheck.Main(m) }
