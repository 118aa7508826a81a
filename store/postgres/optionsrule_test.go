package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/secrettest"
	"github.com/idemkit/idemkit/store/postgres"
)

// TestOptionsRule: a nil option or an invalid value fails construction with
// an error matching store.ErrInvalid that names the package once and says
// "invalid argument" once.
func TestOptionsRule(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none") // never connects: New does no I/O
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for name, opts := range map[string][]postgres.Option{
		"nil": {nil}, "empty table": {postgres.WithTable("")}, "empty schema": {postgres.WithSchema("")}, "purge batch 0": {postgres.WithPurgeBatch(0)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := postgres.New(pool, opts...)
			secrettest.CheckInvalid(t, "postgres", err)
		})
	}
}
