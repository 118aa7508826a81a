package sqlite_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store/sqlite"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {
	for name, opts := range map[string][]sqlite.Option{
		"nil": {nil}, "nil clock": {sqlite.WithClock(nil)}, "busy timeout 0": {sqlite.WithBusyTimeout(0)}, "purge batch 0": {sqlite.WithPurgeBatch(0)}, "empty pragma": {sqlite.WithPragma("")}, "max conns 0": {sqlite.WithMaxConns(0)}, "empty table": {sqlite.WithTable("")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sqlite.Open(":memory:", opts...)
			secrettest.CheckInvalid(t, "sqlite", err)
		})
	}
}
