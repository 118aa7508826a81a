package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestQuerier: outside InTx the handler's querier is the pool, inside it
// the transaction InTx carries.
func TestQuerier(t *testing.T) {
	pool := testPool(t)
	s := newTestStore(t, pool)
	assert.Equal(t, DB(pool), Querier(t.Context(), pool))
	require.NoError(t, s.InTx(t.Context(), func(ctx context.Context, _ store.Store) error {
		tx, ok := TxFrom(ctx)
		require.True(t, ok)
		assert.Equal(t, DB(tx), Querier(ctx, pool))
		return nil
	}))
}
