package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/coalesce"
	"github.com/idemkit/idemkit/store"
)

// Coalescing: the first command of a Claim (SET NX GET PX) and the
// completion script of a Complete with a small response (EVALSHA), when
// they come from callers of one Store at the same time, are sent together in
// one pipeline instead of one round trip each (internal/coalesce). A lone
// caller sends its command at once, as without coalescing. Everything else
// a Claim or Complete may do (deciding the outcome, renewing its own lease,
// the Lua fallback for servers without SET ... NX GET, reloading a script,
// WithReplicas, large responses) is the single-key code, run by the caller
// or, for a command the pipeline could not do, again alone.

// Measured with BenchmarkPaired's Coalesced case (2-core machine, Redis 7.0
// on loopback, 32 workers): 2, 4 and 8 pipelines in flight gave 1.7, 1.75
// and 1.4× raw, 1 far less (a batch waits for the last to return); batches
// of at most 32 or 64 made no difference. Two keeps the fewest connections
// busy; the bound keeps one slow pipeline from delaying many callers.
const (
	coalesceSlots = 2
	coalesceMax   = 64
)

// WithCoalescing turns coalescing on or off (the default): with it, claims
// and small completions that callers of the Store make at the same time
// are sent to Redis together, in one pipeline (two in flight at most, 64
// calls each), each still checked and answered on its own. It changes
// neither results nor guarantees; a caller alone sends exactly what it
// sends without, at once.
//
// Turn it on when many goroutines share a Store and Redis or the client's
// CPU is the bottleneck: with 32 callers, Claim+Complete ran 1.7× as fast
// as the same commands sent one per call. It is off by default because
// what it saves it gives to everyone sharing the server: measured against
// other clients' single commands running at the same moment (32 workers
// alternating the two), a coalesced call waits for its batch and ran
// 0.6–0.8× as fast as theirs, contended claims included, where without it
// the two are equal.
// WithReplicas sends every call alone whatever this says.
func WithCoalescing(enabled bool) Option {
	return func(o *options) error { o.coalesce = enabled; return nil }
}

// opKind is what a coalesced op does.
type opKind uint8

const (
	opClaim    opKind = iota + 1 // SET rk val NX GET PX ms
	opComplete                   // the completion script on rk
)

// op is one coalesced command.
type op struct {
	kind     opKind
	rk       string
	val      string // claim: the record in progress
	ms       int64  // claim: lease; complete: retention
	token    store.Token
	at       int64 // complete: the new ExpiresAt
	response []byte
}

// opResult is an op's answer: for a claim, set (the key was absent and now
// holds val) or cur (the value there); for a completion, the script's n.
type opResult struct {
	cur string
	set bool
	n   int64
}

// newBatcher returns the Store's batcher of claims and completions.
func (s *Store) newBatcher() *coalesce.Batcher[op, opResult] {
	return coalesce.New(coalesceSlots, coalesceMax, s.runOne, s.runMany)
}

// coalescing reports whether claims and small completions go through the
// batcher.
func (s *Store) coalescing() bool { return s.batch != nil && !s.waiting() }

// runOne is an op alone: exactly the single-key code.
func (s *Store) runOne(ctx context.Context, o op) (opResult, error) {
	switch o.kind {
	case opClaim:
		cur, set, err := s.setNX(ctx, o.rk, o.val, o.ms)
		return opResult{cur: cur, set: set}, err
	case opComplete:
		n, err := s.complete(ctx, o.rk, o.token, o.response, o.at, o.ms)
		return opResult{n: n}, err
	}
	return opResult{}, errors.New("unknown coalesced operation")
}

// runMany sends a batch of ops in one pipeline (on a Cluster, go-redis
// splits it by node) and sets each call's result. An op whose reply calls
// for the single-key code's handling (NOSCRIPT, a syntax error from a
// server before Redis 7.0) is run again alone, after the pipeline.
func (s *Store) runMany(ctx context.Context, calls []*coalesce.Call[op, opResult]) {
	cmds := make([]goredis.Cmder, len(calls))
	p := s.client.Pipeline()
	for i, c := range calls {
		o := c.Req
		switch o.kind {
		case opClaim:
			if s.noSetGet.Load() {
				continue // the script fallback: alone, below
			}
			cmds[i] = newSetNX(ctx, o.rk, o.val, o.ms)
		case opComplete:
			cmds[i] = newComplete(ctx, o.rk, o.token, o.response, o.at, o.ms)
		default:
			continue // runOne reports it, below
		}
		_ = p.Process(ctx, cmds[i])
	}
	if p.Len() > 0 {
		_, _ = p.Exec(ctx) // each command carries its own error
	}
	for i, c := range calls {
		cmd := cmds[i]
		if cmd == nil {
			c.Set(s.runOne(c.Context(), c.Req))
			continue
		}
		switch c.Req.kind {
		case opClaim:
			cur, err := cmd.(*goredis.StringCmd).Result()
			switch {
			case errors.Is(err, goredis.Nil):
				c.Set(opResult{set: true}, nil)
			case err == nil:
				c.Set(opResult{cur: cur}, nil)
			case isSyntaxError(err):
				c.Set(s.runOne(c.Context(), c.Req)) // setNX switches to the script
			default:
				c.Set(opResult{}, err)
			}
		case opComplete:
			n, err := cmd.(*goredis.IntCmd).Result()
			if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
				c.Set(s.runOne(c.Context(), c.Req)) // Run loads the script
				continue
			}
			c.Set(opResult{n: n}, err)
		}
	}
}
