package idem

import "context"

// Attempt tells the work which claim of its key it runs under. The store
// counts the claims that acquired the key (store.Record.Attempt): 1 for the
// first, one more for each that took over a lease that lapsed before its
// holder completed. Fence grows with every claim of the key, so the work can
// pass it to its own writes and a downstream system can refuse a stale
// holder (UPDATE ... WHERE fence < $new).
type Attempt struct {
	// Number is the store's attempt count for the key: 1 for the first
	// claim, 2 after one takeover, and so on.
	Number uint32
	// Fence is the claim's fencing number: larger than that of every earlier
	// claim of the key.
	Fence uint64
	// Takeover is set when Number is above 1: an earlier holder ran the work
	// for this key and lost its lease before it completed, so the effect
	// may already have happened. Look it up (ask the payment provider by
	// key, say) before acting again.
	Takeover bool
}

type attemptKey struct{}

// AttemptFrom returns the Attempt of the work whose context is ctx (the
// context the engine passes to the work, or one derived from it), and
// false outside a work.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}
