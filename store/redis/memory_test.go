package redis_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// TestMemoryPerRecord measures, with MEMORY USAGE on the real Redis, what a
// typical record costs, and checks the sizing rule the README gives: the key
// and value bytes plus at most 100 bytes of Redis overhead (dict entry, object
// headers, expiry entry), plus, for large values, the allocator's rounding up
// to its next size class (at most a quarter of the value).
func TestMemoryPerRecord(t *testing.T) {
	c := realClient(t)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	s := redis.MustNew(t, c, redis.WithPrefix(prefix))
	key := "tenant-42:" + "3f2b8c1e-6a4d-4e1b-9c7a-0d5e8f9a1b2c" // a scoped UUID key
	fp := strings.Repeat("ab", 32)                               // a hex SHA-256
	tok := store.NewToken()
	for _, size := range []int{0, 200, 2000} {
		k := key + "-" + strconv.Itoa(size)
		_, err := s.Claim(ctx, k, fp, tok, time.Minute)
		require.NoError(t, err)
		inProgress := usage(t, c.MemoryUsage(ctx, prefix+k).Val())
		resp := bytes.Repeat([]byte("r"), size)
		require.NoError(t, s.Complete(ctx, k, tok, resp, time.Hour))
		completed := usage(t, c.MemoryUsage(ctx, prefix+k).Val())

		keyLen := len(prefix) + len(k)
		valIP := 13 + len(tok) + len(fp)
		valC := valIP + size
		t.Logf("key %d B, token %d B, fingerprint %d B, response %d B: in progress %d B (key+value %d), completed %d B (key+value %d)",
			keyLen, len(tok), len(fp), size, inProgress, keyLen+valIP, completed, keyLen+valC)
		assert.GreaterOrEqual(t, inProgress, int64(keyLen+valIP))
		assert.LessOrEqual(t, inProgress, int64(keyLen+valIP+100))
		assert.GreaterOrEqual(t, completed, int64(keyLen+valC))
		assert.LessOrEqual(t, completed, int64(keyLen+valC+100+valC/4))
	}
}

func usage(t *testing.T, n int64) int64 {
	t.Helper()
	require.Positive(t, n, "MEMORY USAGE")
	return n
}
