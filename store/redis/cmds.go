package redis

import (
	"context"
	"encoding/binary"
	"unsafe"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// The two commands of a cycle, Claim's SET NX GET and Complete's EVALSHA,
// are built here with their arguments in one allocation each: go-redis
// writes a *string or *int64 argument as it writes a string or int64 (and
// reads a *string key for Cluster and Ring routing), so pointing into the
// struct boxes nothing, where passing the strings and the integer as any
// allocates each and the variadic slice besides. The replies are read
// typed (StringCmd, IntCmd), not boxed into a Cmd's any.

// keyAndClaim returns prefix+key and the encoded record in progress
// (Attempt 1, the given Fence), both views of one allocation.
func (s *Store) keyAndClaim(key string, token store.Token, fingerprint string, at int64, fence uint64) (rk, val string) {
	n := len(s.prefix) + len(key)
	b := make([]byte, 0, n+headerSize+len(token)+len(fingerprint))
	b = append(b, s.prefix...)
	b = append(b, key...)
	b = appendRecord(b, statusInProgress, token, fingerprint, at, 1, fence, nil)
	p := unsafe.SliceData(b)
	return unsafe.String(p, n), unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), n)), len(b)-n)
}

// setNXCmd is SET rk val NX GET PX ms with its arguments.
type setNXCmd struct {
	rk, val string
	ms      int64
	args    [7]any
}

// newSetNX returns the command SET rk val NX GET PX ms, to Process. Its
// reply is the value that was there, or redis.Nil when the key was absent
// and now holds val.
func newSetNX(ctx context.Context, rk, val string, ms int64) *goredis.StringCmd {
	c := &setNXCmd{rk: rk, val: val, ms: ms}
	c.args = [7]any{"set", &c.rk, &c.val, "nx", "get", "px", &c.ms}
	cmd := goredis.NewStringCmd(ctx, c.args[:]...)
	cmd.SetFirstKeyPos(1)
	return cmd
}

// completeSHA is completeScript's SHA1, for EVALSHA.
var completeSHA = completeScript.Hash()

// completeCmd is EVALSHA of completeScript with its arguments.
type completeCmd struct {
	rk, token, at, response string
	ms                      int64
	atBuf                   [8]byte
	args                    [8]any
}

// newComplete returns EVALSHA of completeScript on rk, to Process; its reply
// is the script's. A NOSCRIPT error means the server has not loaded the
// script: run it with completeScript.Run then, which loads it. response is
// read only while the command is written, as go-redis does with a []byte
// argument.
func newComplete(ctx context.Context, rk string, token store.Token, response []byte, at, ms int64) *goredis.IntCmd {
	c := &completeCmd{rk: rk, token: string(token), ms: ms}
	binary.BigEndian.PutUint64(c.atBuf[:], uint64(at))
	c.at = unsafe.String(&c.atBuf[0], len(c.atBuf))
	c.response = unsafe.String(unsafe.SliceData(response), len(response))
	c.args = [8]any{"evalsha", &completeSHA, 1, &c.rk, &c.token, &c.at, &c.response, &c.ms}
	cmd := goredis.NewIntCmd(ctx, c.args[:]...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// runComplete runs completeScript on rk (not for WithReplicas: see run),
// with newComplete, loading the script when the server lacks it.
func (s *Store) runComplete(ctx context.Context, rk string, token store.Token, response []byte, at, ms int64) (int64, error) {
	cmd := newComplete(ctx, rk, token, response, at, ms)
	_ = s.client.Process(ctx, cmd)
	n, err := cmd.Result()
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		return completeScript.Run(ctx, s.client, []string{rk}, string(token), encodeTime(at), response, ms).Int64()
	}
	return n, err
}
