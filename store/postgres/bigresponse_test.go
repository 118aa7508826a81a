package postgres

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestCompleteLargeResponseCopiedOnce: storing one 64 MiB response (8 MiB
// with coalescing and in InTx, to keep the test short) allocates at most one
// more copy of it (the wire message; pgx's argument encoding allocated two);
// it reads
// back whole, and the large path keeps Complete's rules (another token's
// Complete is ErrLeaseLost, a second Complete keeps the first response).
func TestCompleteLargeResponseCopiedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB through the server")
	}
	pool := testPool(t)
	resp := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	allocs := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, mode := range []string{"plain", "coalesced", "InTx"} {
		t.Run(mode, func(t *testing.T) {
			var s *Store
			if mode == "coalesced" {
				s = newTestStore(t, pool, WithCoalescing(true))
			} else {
				s = newTestStore(t, pool)
			}
			ctx := t.Context()
			tok := store.NewToken()
			resp := resp
			if mode != "plain" {
				resp = resp[:8<<20]
			}
			// Warm a connection (statement cache, buffers) on a small response.
			_, err := s.Claim(ctx, "warm", "fp", tok, time.Minute)
			require.NoError(t, err)
			require.NoError(t, s.Complete(ctx, "warm", tok, []byte("r"), time.Hour))

			complete := func(ctx context.Context, st store.Store) {
				_, err := st.Claim(ctx, "big", "fp", tok, time.Minute)
				require.NoError(t, err)
				n := allocs(func() { require.NoError(t, st.Complete(ctx, "big", tok, resp, time.Hour)) })
				t.Logf("Complete of %d MiB allocated %d MiB", len(resp)>>20, n>>20)
				require.Less(t, n, uint64(len(resp))*3/2, "the response is copied at most once")
				require.ErrorIs(t, st.Complete(ctx, "big", store.NewToken(), resp, time.Hour), store.ErrLeaseLost)
				require.NoError(t, st.Complete(ctx, "big", tok, []byte("second"), time.Hour))
			}
			if mode == "InTx" {
				require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
					complete(ctx, tx)
					return nil
				}))
			} else {
				complete(ctx, s)
			}
			r, err := s.Get(ctx, "big")
			require.NoError(t, err)
			require.True(t, bytes.Equal(resp, r.Response), "the first response reads back whole")
		})
	}
}
