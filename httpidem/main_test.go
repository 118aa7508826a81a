package httpidem_test

import (
	"log/slog"
	"testing"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// The middleware logs failures the tests provoke on purpose.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	// Renewal timers and handler goroutines must all be gone after the tests.
	leakcheck.Main(m)
}
