package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// The Store and the reference store (store/memory) on one manual clock,
// given the same random calls one after another, give the same answers:
// outcomes, records with their Attempt and Fence, errors, Purge counts.
// Claims go either way round (write first, read first) at random.
func TestSameAsMemoryStore(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			clock := storetest.NewManualClock(time.Now().Truncate(time.Second))
			s := newTestStore(t, WithClock(clock.Now))
			ref, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			require.NoError(t, err)
			t.Cleanup(func() { ref.Close() })
			rng := rand.New(rand.NewPCG(seed, 1))
			keys := []string{"a", "b", "c"}
			toks := []store.Token{"t1", "t2", "t3"}
			durs := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}
			pick := func(n int) int { return rng.IntN(n) }
			ctx := t.Context()
			for step := range 3000 {
				k, tok, d := keys[pick(len(keys))], toks[pick(len(toks))], durs[pick(len(durs))]
				var got, want string
				switch op := pick(8); op {
				case 0, 1:
					fp := []string{"fp", "fp2"}[pick(10)/9]
					s.claimHint.Store([]int32{claimHintMax, -claimHintMax}[pick(2)])
					c1, err1 := s.Claim(ctx, k, fp, tok, d)
					c2, err2 := ref.Claim(ctx, k, fp, tok, d)
					got, want = describeClaim(c1, err1), describeClaim(c2, err2)
				case 2:
					resp := []byte(fmt.Sprint("r", step))
					got, want = describeErr(s.Complete(ctx, k, tok, resp, d)), describeErr(ref.Complete(ctx, k, tok, resp, d))
				case 3:
					got, want = describeErr(s.Release(ctx, k, tok)), describeErr(ref.Release(ctx, k, tok))
				case 4:
					got, want = describeErr(s.Renew(ctx, k, tok, d)), describeErr(ref.Renew(ctx, k, tok, d))
				case 5:
					r1, err1 := s.Get(ctx, k)
					r2, err2 := ref.Get(ctx, k)
					got, want = describeRecord(r1, err1), describeRecord(r2, err2)
				case 6:
					clock.Advance([]time.Duration{time.Microsecond, 500 * time.Millisecond, time.Second, 3 * time.Second, store.LapsedKept / 2}[pick(5)])
					continue
				case 7:
					n1, err1 := s.Purge(ctx)
					n2, err2 := ref.Purge(ctx)
					got, want = fmt.Sprint(n1, " ", describeErr(err1)), fmt.Sprint(n2, " ", describeErr(err2))
				}
				require.Equal(t, want, got, "step %d", step)
			}
		})
	}
}

func describeErr(err error) string {
	for _, e := range []error{store.ErrLeaseLost, store.ErrNotFound, store.ErrInvalid} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func describeClaim(c store.Claim, err error) string {
	if err != nil {
		return describeErr(err)
	}
	return c.Outcome.String() + " " + describeRecord(c.Record, nil)
}

func describeRecord(r store.Record, err error) string {
	if err != nil {
		return describeErr(err)
	}
	resp := "nil"
	if r.Response != nil {
		resp = string(bytes.Clone(r.Response))
	}
	return fmt.Sprintf("%s %s %v %q until=%d expires=%d attempt=%d fence=%d response=%s",
		r.Key, r.Fingerprint, r.Status, r.Token, r.LockedUntil.UnixMicro(), r.ExpiresAt.UnixMicro(), r.Attempt, r.Fence, resp)
}
