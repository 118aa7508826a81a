package redis

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestKeyAndClaim: the key and the record in progress built in one
// allocation are exactly prefix+key and encode's value, for every prefix
// (empty included).
func TestKeyAndClaim(t *testing.T) {
	tok := store.NewToken()
	for _, prefix := range []string{"", "idem:", "{tag}:"} {
		s := &Store{prefix: prefix}
		rk, val := s.keyAndClaim("k", tok, "fp", 12345, 777)
		assert.Equal(t, prefix+"k", rk)
		assert.Equal(t, encode(statusInProgress, tok, "fp", 12345, 1, 777, nil), val)
	}
}

// TestCommandArgs: the commands built with pointer arguments carry the
// same arguments, in the same places, as the ones go-redis builds from
// strings and integers (Cluster routing reads the key from them: the
// conformance suite runs on a Cluster).
func TestCommandArgs(t *testing.T) {
	ctx := context.Background()
	tok := store.NewToken()
	deref := func(args []any) []any {
		out := make([]any, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case *string:
				out[i] = *v
			case *int64:
				out[i] = *v
			default:
				out[i] = v
			}
		}
		return out
	}
	set := newSetNX(ctx, "rk", "val", 60000)
	assert.Equal(t, []any{"set", "rk", "val", "nx", "get", "px", int64(60000)}, deref(set.Args()))
	resp := []byte("response")
	done := newComplete(ctx, "rk", tok, resp, 777, 300000)
	require.Len(t, done.Args(), 8)
	assert.Equal(t, []any{"evalsha", completeScript.Hash(), 1, "rk", string(tok), encodeTime(777), "response", int64(300000)}, deref(done.Args()))
}
