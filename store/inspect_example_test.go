package store_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// An operator's look inside a store: the keys in flight, oldest deadline
// first, a page at a time, and the counts by state. Tokens are shown only
// hashed.
func ExampleInspector() {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := memory.New(memory.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for i, key := range []string{"order-3", "order-1", "order-2"} {
		if _, err := s.Claim(ctx, key, "", store.NewToken(), time.Duration(i+1)*time.Minute); err != nil {
			log.Fatal(err)
		}
	}
	in, ok := store.Store(s).(store.Inspector)
	if !ok {
		log.Fatal("this store cannot be inspected")
	}
	o := store.ListOptions{State: store.StateInProgress, Limit: 2}
	for page := 1; ; page++ {
		p, err := in.List(ctx, o)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range p.Entries {
			fmt.Printf("page %d: %s %s, lease ends %s\n", page, e.Key, e.State, e.LockedUntil.Format(time.TimeOnly))
		}
		if p.Next == "" {
			break
		}
		o.Cursor = p.Next
	}
	c, err := in.Count(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("in progress %d, completed %d, oldest lease ends %s\n", c.InProgress, c.Completed, c.OldestLease.Format(time.TimeOnly))
	// Output:
	// page 1: order-3 in_progress, lease ends 03:05:05
	// page 1: order-1 in_progress, lease ends 03:06:05
	// page 2: order-2 in_progress, lease ends 03:07:05
	// in progress 3, completed 0, oldest lease ends 03:05:05
}
