package idem

import (
	"context"
	"time"
)

// HeartbeatLoops returns how many renewal loops have started in this
// process.
func HeartbeatLoops() int64 { return loopsStarted.Load() }

// LeaseFor returns the lease of a run of e whose caller's context is ctx.
func LeaseFor(e *Engine, ctx context.Context) time.Duration { return e.leaseFor(ctx) }
