package sqlite_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store/sqlite"

	"github.com/idemkit/idemkit/store"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {

	for name, opts := range map[string][]sqlite.Option{
		"nil": {nil}, "nil clock": {sqlite.WithClock(nil)}, "busy timeout 0": {sqlite.WithBusyTimeout(0)}, "purge batch 0": {sqlite.WithPurgeBatch(0)}, "empty pragma": {sqlite.WithPragma("")}, "max conns 0": {sqlite.WithMaxConns(0)}, "empty table": {sqlite.WithTable("")},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := sqlite.Open(":memory:", opts...)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("got %v, %v; want an error matching store.ErrInvalid", s, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "sqlite: ") || strings.Count(msg, "sqlite: ") != 1 || strings.Count(msg, "invalid argument") != 1 {
				t.Errorf("message %q: want one %q prefix and one %q", msg, "sqlite: ", "invalid argument")
			}
		})
	}
}
