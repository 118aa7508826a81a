package purge_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// A service starts the job beside its server and stops it with the same
// context; every run's count goes to the logger and to observers (metrics).
func ExampleRun() {
	s, err := memory.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- purge.Run(ctx, s,
			purge.WithInterval(10*time.Minute),
			purge.WithLogger(slog.New(slog.DiscardHandler)),
			purge.WithObserver(func(_ context.Context, r purge.Result) {
				fmt.Println("deleted", r.Deleted, "err", r.Err)
				stop() // for the example: one run is enough
			}))
	}()
	fmt.Println(<-done)
	// Output:
	// deleted 0 err <nil>
	// <nil>
}

// Once runs a single purge, for a cron job or an admin endpoint.
func ExampleJob_Once() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := memory.New(memory.WithClock(func() time.Time { return now }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	tok := store.NewToken()
	s.Claim(ctx, "k1", "fp", tok, time.Minute)
	s.Complete(ctx, "k1", tok, []byte("ok"), time.Hour)

	j, err := purge.New(s, purge.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("within retention:", j.Once(ctx).Deleted)
	now = now.Add(2 * time.Hour)
	fmt.Println("after retention:", j.Once(ctx).Deleted)
	// Output:
	// within retention: 0
	// after retention: 1
}
