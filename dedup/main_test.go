package dedup_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// TestMain closes the shared PostgreSQL pool after the tests, then fails the
// run if any goroutine is left behind (a heartbeat, a store's background
// work), as leakcheck.Main does.
func TestMain(m *testing.M) {
	code := m.Run()
	if pgShared.pool != nil {
		pgShared.pool.Close()
	}
	if code == 0 {
		if leaked := leakcheck.Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
