package seal_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

// TestMain runs the tests, closes the shared PostgreSQL pool, then fails
// the run if goroutines were left behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if pg.pool != nil {
		pg.pool.Close()
	}
	if code == 0 {
		if leaked := leakcheck.Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
