package mysql

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestQuerier: outside InTx the handler's querier is the database, inside
// it the transaction InTx carries.
func TestQuerier(t *testing.T) {
	s := newTestStore(t, testDB(t))
	assert.Same(t, s.DB(), Querier(t.Context(), s.DB()))
	require.NoError(t, s.InTx(t.Context(), func(ctx context.Context, _ store.Store) error {
		tx, ok := TxFrom(ctx)
		require.True(t, ok)
		assert.Same(t, tx, Querier(ctx, s.DB()))
		return nil
	}))
}
