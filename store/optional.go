package store

import (
	"context"
	"io"
)

// A Migrator creates what its Store needs in the database (tables,
// indexes), idempotently: running it again, or from several processes at
// once, is harmless. SQL backends implement it; a Store without one needs no
// migration. Migrate finds it for you.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Migrate runs s.Migrate when s is a Migrator and otherwise does nothing, so
// code that opened s from a URL can prepare any backend the same way.
func Migrate(ctx context.Context, s Store) error {
	if m, ok := s.(Migrator); ok {
		return m.Migrate(ctx)
	}
	return nil
}

// Close closes s when it is an io.Closer and otherwise does nothing. Every
// idemkit backend has a Close: a Store made by Open releases its pool,
// client or file; one made by a backend's New on the caller's client leaves
// that client open. A nil s is allowed.
func Close(s Store) error {
	if c, ok := s.(io.Closer); ok && c != nil {
		return c.Close()
	}
	return nil
}
