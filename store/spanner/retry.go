package spanner

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	sp "cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
)

// retryTx runs one read-write transaction, run, again while it fails
// because Spanner no longer knows the transaction, with a growing,
// jittered pause (5ms, then half as long again each time, at most 500ms),
// until it succeeds, fails otherwise, or ctx ends.
//
// The client itself already retries aborts (codes.Aborted, with Spanner's
// own backoff); retryTx adds the failures that say the transaction is gone,
// not that it conflicted: the emulator, which runs one read-write
// transaction per database at a time, drops an older transaction of a
// multiplexed session when a newer one begins and then answers its next
// call with "Invalid transaction ID", "Transaction not found" or "Cannot
// read or query using a transaction after it has been committed or
// rolledback"; Spanner answers "Transaction not found" for a transaction it
// dropped after it sat idle too long. None of these transactions can have
// committed, and every operation of the Store is safe to run again
// anyway: a Claim, Complete or Release that did commit finds its own
// token's record the second time and returns what the first would have.
func retryTx(ctx context.Context, run func() error) error {
	pause := 5 * time.Millisecond
	for {
		err := run()
		if err == nil || !dropped(err) {
			return err
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(pause*3/2, 500*time.Millisecond)
	}
}

// dropped reports whether err says that Spanner no longer knows the
// transaction (see retryTx).
func dropped(err error) bool {
	msg := err.Error()
	switch sp.ErrCode(err) {
	case codes.FailedPrecondition:
		return strings.Contains(msg, "Invalid transaction ID") ||
			strings.Contains(msg, "after it has been committed or rolledback")
	case codes.NotFound:
		return strings.Contains(msg, "Transaction not found")
	}
	return false
}
