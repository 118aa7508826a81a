package seal

import (
	"context"

	"github.com/idemkit/idemkit/store"
)

// The four shapes New returns: the dynamic type has InTx only when the
// wrapped store is a store.Transactor and Purge only when it is a
// store.Purger, so a type assertion on the sealed store tells the truth.
type (
	plain      struct{ *sealed }
	withTx     struct{ *sealed }
	withPurge  struct{ *sealed }
	withTxPurg struct{ *sealed }
)

func withCapabilities(s *sealed) Store {
	_, tx := s.inner.(store.Transactor)
	_, purger := s.inner.(store.Purger)
	switch {
	case tx && purger:
		return withTxPurg{s}
	case tx:
		return withTx{s}
	case purger:
		return withPurge{s}
	}
	return plain{s}
}

// InTx runs the wrapped store's InTx, with fn's Store sealing what it
// writes in the transaction and opening what it reads, as this one does.
func (s withTx) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return s.inner.(store.Transactor).InTx(ctx, func(ctx context.Context, tx store.Store) error {
		return fn(ctx, &sealed{inner: tx, scope: s.scope, kr: s.kr})
	})
}

// InTx is withTx's.
func (s withTxPurg) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return withTx(s).InTx(ctx, fn)
}

// Purge runs the wrapped store's Purge; nothing it reads is sealed.
func (s withPurge) Purge(ctx context.Context) (int64, error) {
	return s.inner.(store.Purger).Purge(ctx)
}

// Purge is withPurge's.
func (s withTxPurg) Purge(ctx context.Context) (int64, error) { return withPurge(s).Purge(ctx) }
