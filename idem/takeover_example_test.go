package idem_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// The work asks which claim of its key it runs under. Here an earlier
// holder claimed the key and died before it finished; once its lease
// lapsed, the next run takes the key over and is told so, with a fence
// larger than the dead holder's to pass to its own writes.
func ExampleAttemptFrom() {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, _ := memory.New(memory.WithClock(clock))
	defer st.Close()
	e, _ := idem.New(st)

	// A holder that claims the key and is never heard of again.
	dead, _ := st.Claim(context.Background(), "order-1", "", store.NewToken(), time.Minute)
	mu.Lock()
	now = now.Add(time.Hour) // its lease lapses
	mu.Unlock()

	_, err := e.Run(context.Background(), "order-1", "", func(ctx context.Context) idem.Verdict {
		a, _ := idem.AttemptFrom(ctx)
		if a.Takeover {
			// The dead holder may have charged already: ask the provider
			// by key before charging, and write with the fence.
			fmt.Println("attempt", a.Number, "takes over; fence grew:", a.Fence > dead.Record.Fence)
		}
		return idem.Keep([]byte("charged"))
	})
	fmt.Println("err:", err)
	// Output:
	// attempt 2 takes over; fence grew: true
	// err: <nil>
}
