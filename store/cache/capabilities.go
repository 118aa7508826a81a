package cache

import (
	"context"

	"github.com/idemkit/idemkit/store"
)

// The four shapes New returns: the dynamic type has InTx only when the
// wrapped store is a store.Transactor and Purge only when it is a
// store.Purger, so a type assertion on the cache tells the truth.
type (
	plain      struct{ *cached }
	withTx     struct{ *cached }
	withPurge  struct{ *cached }
	withTxPurg struct{ *cached }
)

func withCapabilities(c *cached) Store {
	_, tx := c.inner.(store.Transactor)
	_, purger := c.inner.(store.Purger)
	switch {
	case tx && purger:
		return withTxPurg{c}
	case tx:
		return withTx{c}
	case purger:
		return withPurge{c}
	}
	return plain{c}
}

// InTx runs the wrapped store's InTx. Inside the transaction fn's Store
// goes straight to the transaction's store: nothing is answered from the
// cache and nothing the transaction sees is cached, since it may roll back.
func (c withTx) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return c.inner.(store.Transactor).InTx(ctx, fn)
}

// InTx is withTx's.
func (c withTxPurg) InTx(ctx context.Context, fn func(ctx context.Context, s store.Store) error) error {
	return withTx(c).InTx(ctx, fn)
}

// Purge runs the wrapped store's Purge. The records it deletes are past
// their ExpiresAt, after which no cached record is served, so the cache has
// nothing to drop.
func (c withPurge) Purge(ctx context.Context) (int64, error) {
	return c.inner.(store.Purger).Purge(ctx)
}

// Purge is withPurge's.
func (c withTxPurg) Purge(ctx context.Context) (int64, error) { return withPurge(c).Purge(ctx) }
