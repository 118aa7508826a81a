package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by the error of a Claim or Complete made with
// WithReplicas when its write reached the master but fewer replicas than
// asked acknowledged it within the timeout. The write may still reach them
// later, or be lost if the master fails first: the call did not keep its
// promise, so it fails as a store error (it is never one of the store's
// sentinels). A Claim that created the key releases it again before
// failing, so the caller's retry can claim it afresh; a Complete leaves its
// record completed on the master and the caller retries the Complete.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// waitOptions are set by WithReplicas.
type waitOptions struct {
	n       int
	timeout time.Duration
}

// WithReplicas makes every Claim that writes (a new key, a lease taken over
// or renewed), every Renew that extends a lease and every Complete wait until n replicas of the key's master
// have acknowledged the write, with Redis' WAIT n timeout, sent in the same
// pipeline on the same connection as the write (on a Cluster, to the master
// that owns the key's slot). When fewer than n acknowledge within timeout the
// call fails with an error wrapping ErrNotReplicated instead of reporting
// Acquired or success. n = 0 turns waiting off (the default).
//
// What it buys: a claim or completion acknowledged by n replicas survives a
// failover of its master unless those n replicas are lost too. What it does
// not: Redis stays asynchronous and is not made strongly consistent (a
// replica that acknowledged may still not be the one promoted, a write that
// failed with ErrNotReplicated may still surface later, and nothing is
// fsynced by WAIT). It costs one WAIT per write, that is the replication
// round trip (see RELIABILITY.md for figures), and with fewer than n
// replicas connected every write fails after timeout. A Claim that writes
// nothing (a replay, a key in progress, a mismatch) answers as usual
// whatever the replicas did, but its WAIT travels in the same pipeline as
// the SET, so while replicas are missing it too takes up to timeout.
//
// Works with a *redis.Client (standalone or Sentinel failover client) and a
// *redis.ClusterClient; New rejects other clients, a negative n, a timeout
// that is not positive (WAIT 0 would block forever) and one that is not
// below the client's ReadTimeout, within which go-redis reads a pipeline's
// replies. On a Cluster, a write to a slot being migrated (ASK) fails
// instead of following the redirection, and a call that meets a moved slot
// or a failed master fails while the client reloads the slot map: retry it.
// When the connection fails between a write and its WAIT, the call fails
// with that error and a claim it may have written is left to lapse with its
// lease.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(o *options) error {
		if n < 0 || (n > 0 && timeout <= 0) {
			return fmt.Errorf("WithReplicas(%d, %v): pass n >= 0 and a positive timeout", n, timeout)
		}
		o.wait = waitOptions{n: n, timeout: timeout}
		return nil
	}
}

// checkWaitClient returns what makes client unfit for WithReplicas(w).
func checkWaitClient(client goredis.UniversalClient, w waitOptions) error {
	var rt time.Duration
	switch c := client.(type) {
	case *goredis.Client:
		rt = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		rt = c.Options().ReadTimeout
	default:
		return fmt.Errorf("WithReplicas needs a *redis.Client or a *redis.ClusterClient, not %T: pass one of those, or drop the option", client)
	}
	if rt > 0 && w.timeout >= rt {
		return fmt.Errorf("WithReplicas: timeout %v is not below the client's ReadTimeout %v: pass a shorter timeout or raise ReadTimeout", w.timeout, rt)
	}
	return nil
}

// WithPersistenceCheck turns the first-use persistence check (see
// CheckPersistence) on (the default) or off: off where CONFIG is disabled
// and persistence is known to be on, or where losing every record on a
// restart is accepted (a cache in front of something that deduplicates
// again).
func WithPersistenceCheck(enabled bool) Option {
	return func(o *options) error { o.checkPersist = enabled; return nil }
}

// waiting reports whether writes wait for replicas.
func (s *Store) waiting() bool { return s.wait.n > 0 }

// waitNode returns the client of the node that owns rk, on which a write and
// its WAIT must share a connection (New made sure the client is one of
// these two).
func (s *Store) waitNode(ctx context.Context, rk string) (*goredis.Client, error) {
	switch c := s.client.(type) {
	case *goredis.Client:
		return c, nil
	case *goredis.ClusterClient:
		n, err := c.MasterForKey(ctx, rk)
		if err != nil {
			return nil, fmt.Errorf("finding the master of the key: %w", err)
		}
		return n, nil
	}
	return nil, fmt.Errorf("WithReplicas needs a *redis.Client or a *redis.ClusterClient, not %T", s.client)
}

// pipeWait sends the command queue adds, then WAIT, in one pipeline on one
// connection of the node that owns rk, and returns the command and the
// number of replicas that acknowledged. err is the command's own error
// (redis.Nil included, with acked set), or WAIT's.
func (s *Store) pipeWait(ctx context.Context, rk string, queue func(p goredis.Pipeliner) goredis.Cmder) (goredis.Cmder, int64, error) {
	node, err := s.waitNode(ctx, rk)
	if err != nil {
		return nil, 0, err
	}
	p := node.Pipeline()
	cmd := queue(p)
	w := p.Do(ctx, "wait", s.wait.n, millis(s.wait.timeout))
	_, _ = p.Exec(ctx) // each command carries its own error
	if err := cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
		s.reloadSlots(ctx)
		return cmd, 0, err
	}
	if err := w.Err(); err != nil {
		s.reloadSlots(ctx)
		return cmd, 0, fmt.Errorf("WAIT: %w", err)
	}
	acked, err := w.Int64()
	if err != nil {
		return cmd, 0, fmt.Errorf("WAIT: %w", err)
	}
	return cmd, acked, cmd.Err() // nil, or redis.Nil: SET NX wrote
}

// reloadSlots asks a Cluster client to refresh its slot map after a failed
// pipeline: the master it used may have failed over or lost the slot.
func (s *Store) reloadSlots(ctx context.Context) {
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// evalWait runs sc by SHA on rk followed by WAIT (see pipeWait), loading the
// script into the node once if it does not know it. For the completion
// script it also sends touchScript in between.
func (s *Store) evalWait(ctx context.Context, sc *goredis.Script, rk string, args ...any) (*goredis.Cmd, int64, error) {
	for attempt := 0; ; attempt++ {
		var cmd *goredis.Cmd
		_, acked, err := s.pipeWait(ctx, rk, func(p goredis.Pipeliner) goredis.Cmder {
			cmd = sc.EvalSha(ctx, p, []string{rk}, args...)
			if sc == completeScript {
				p.Eval(ctx, touchScript, []string{rk})
			}
			return cmd
		})
		if err != nil && attempt == 0 && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if node, nerr := s.waitNode(ctx, rk); nerr == nil {
				if lerr := sc.Load(ctx, node).Err(); lerr == nil {
					continue
				}
			}
		}
		if cmd == nil {
			cmd = goredis.NewCmdResult(nil, err)
		}
		return cmd, acked, err
	}
}

// run runs one of the writing scripts (claim, renewal, completion) on rk. Without
// WithReplicas it is sc.Run. With it, the script and WAIT share a pipeline,
// and when the script reports it wrote (see wrote) but fewer replicas acknowledged
// than asked, the result is an error wrapping ErrNotReplicated.
func (s *Store) run(ctx context.Context, sc *goredis.Script, rk string, args ...any) *goredis.Cmd {
	if !s.waiting() {
		return sc.Run(ctx, s.client, []string{rk}, args...)
	}
	cmd, acked, err := s.evalWait(ctx, sc, rk, args...)
	if err != nil {
		return goredis.NewCmdResult(nil, err)
	}
	if wrote(cmd.Val()) && acked < int64(s.wait.n) {
		return goredis.NewCmdResult(nil, s.notReplicated(acked))
	}
	return cmd
}

// wrote reports whether a writing script's reply says it wrote: 1 from the
// renewal and completion scripts, {1, value} or {2, value} from
// acquireScript.
func wrote(v any) bool {
	switch v := v.(type) {
	case int64:
		return v == 1
	case []any:
		if len(v) > 0 {
			n, _ := v[0].(int64)
			return n == 1 || n == 2
		}
	}
	return false
}

// notReplicated is the error of a write that acked replicas acknowledged.
func (s *Store) notReplicated(acked int64) error {
	return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, s.wait.n, s.wait.timeout)
}

// setNXWait is setNX followed by WAIT on the same connection. When it wrote
// and fewer replicas acknowledged, it deletes the key again if it still holds
// val (the caller never learns it held the key, so nothing ran under it) and
// returns an error wrapping ErrNotReplicated.
func (s *Store) setNXWait(ctx context.Context, rk, val string, ms int64) (cur string, set bool, err error) {
	var acked int64
	for {
		if !s.noSetGet.Load() {
			var c goredis.Cmder
			c, acked, err = s.pipeWait(ctx, rk, func(p goredis.Pipeliner) goredis.Cmder {
				return p.Do(ctx, "set", rk, val, "nx", "get", "px", ms)
			})
			if err != nil && isSyntaxError(err) {
				if s.noSetGet.CompareAndSwap(false, true) {
					s.log.Info("redis: the server rejects SET ... NX GET (Redis before 7.0?); claiming with a Lua script instead", "error", err.Error())
				}
				continue
			}
			if c != nil && err == nil {
				cur, err = c.(*goredis.Cmd).Text()
			}
		} else {
			var c *goredis.Cmd
			c, acked, err = s.evalWait(ctx, claimScript, rk, val, ms)
			if err == nil {
				cur, err = c.Text()
			}
		}
		break
	}
	switch {
	case errors.Is(err, goredis.Nil):
		// Written: it counts only once replicated.
	case err != nil:
		return "", false, err
	default:
		return cur, false, nil
	}
	if acked >= int64(s.wait.n) {
		return "", true, nil
	}
	rerr := s.unclaim(ctx, rk, val)
	if rerr != nil {
		return "", false, fmt.Errorf("%w; releasing the claim failed too (it lapses with its lease): %v", s.notReplicated(acked), rerr)
	}
	return "", false, fmt.Errorf("%w; the claim was released", s.notReplicated(acked))
}

// touchScript makes a completed record's connection-level replication
// offset current: it sets the key's expiry to the time it already has
// (PEXPIRETIME, Redis 7.0), a write that changes nothing but is propagated,
// so the WAIT after it also covers the record itself. Without it a retried
// Complete that finds its record already completed writes nothing, and WAIT,
// which waits only for what its own connection wrote, would return at once
// even if the first completion never reached a replica. On servers without
// PEXPIRETIME it fails, and the WAIT covers only the completion's own write.
const touchScript = `
local cur = redis.call('GET', KEYS[1])
if not cur or string.byte(cur, 2) ~= 2 then return 0 end
local at = redis.call('PEXPIRETIME', KEYS[1])
if at > 0 then redis.call('PEXPIREAT', KEYS[1], at) end
return 1
`

// unclaimScript deletes KEYS[1] when it still holds exactly ARGV[1].
var unclaimScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// unclaim deletes rk if it still holds val, the claim this call wrote but
// could not get replicated, even when ctx has just ended.
func (s *Store) unclaim(ctx context.Context, rk, val string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return unclaimScript.Run(ctx, s.client, []string{rk}, val).Err()
}
