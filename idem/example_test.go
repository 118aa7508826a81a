package idem_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

// Run claims the key, runs the work and settles the key by the work's
// verdict: a discarded run is released so the retry runs again; a kept one
// is replayed.
func ExampleEngine_Run() {
	ctx := context.Background()
	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		panic(err)
	}
	charges := 0
	declineNext := true
	charge := func(ctx context.Context) idem.Verdict {
		if declineNext {
			declineNext = false
			return idem.Discard("card declined") // no charge happened
		}
		charges++
		return idem.Keep([]byte(fmt.Sprintf("charge #%d", charges)))
	}
	for range 3 {
		res, err := e.Run(ctx, "order-1", "amount=1990", charge)
		if err != nil {
			panic(err)
		}
		if res.Replay() {
			fmt.Println("replayed:", string(res.Record.Response))
		} else {
			fmt.Println("ran:", res.Settle)
		}
	}
	fmt.Println("charges:", charges)
	// Output:
	// ran: released
	// ran: completed
	// replayed: charge #1
	// charges: 1
}
