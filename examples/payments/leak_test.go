package main

import (
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// TestMain fails the run if the demo leaves goroutines behind (servers,
// pools, lease renewers).
func TestMain(m *testing.M) { leakcheck.Main(m) }
