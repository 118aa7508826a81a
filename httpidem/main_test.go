package httpidem_test

import (
	"log/slog"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The middleware logs failures the tests provoke on purpose.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}
