package cache_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
