package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// The claim → work → complete loop, with release on failure. A retry of a
// finished operation replays its stored answer; a retry of a failed one runs
// the work again.
func Example() {
	ctx := context.Background()
	s, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	payments := 0
	failNext := true
	charge := func(key, request string) string {
		tok := store.NewToken()
		c, err := s.Claim(ctx, key, request, tok, 30*time.Second)
		if err != nil {
			return "store error: " + err.Error()
		}
		switch c.Outcome {
		case store.Completed:
			return "replayed " + string(c.Record.Response)
		case store.InProgress:
			return "still running; retry after " + c.Record.LockedUntil.Format(time.RFC3339)
		case store.Mismatch:
			return "key reused with a different request"
		}
		// Acquired: this call does the work.
		if failNext {
			failNext = false
			_ = s.Release(ctx, key, tok) // let the retry run the work again
			return "failed, key released"
		}
		payments++
		resp := fmt.Sprintf("payment #%d", payments)
		if err := s.Complete(ctx, key, tok, []byte(resp), 24*time.Hour); err != nil {
			return "could not store the response: " + err.Error()
		}
		return "charged " + resp
	}

	fmt.Println(charge("order-1", "amount=1990"))
	fmt.Println(charge("order-1", "amount=1990"))
	fmt.Println(charge("order-1", "amount=1990"))
	fmt.Println(charge("order-1", "amount=9999"))
	fmt.Println("payments made:", payments)
	// Output:
	// failed, key released
	// charged payment #1
	// replayed payment #1
	// key reused with a different request
	// payments made: 1
}

// Sentinel errors are matched with errors.Is; backends wrap them with detail.
func ExampleErrLeaseLost() {
	ctx := context.Background()
	s, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	holder, stranger := store.NewToken(), store.NewToken()
	if _, err := s.Claim(ctx, "k", "", holder, time.Minute); err != nil {
		panic(err)
	}
	err = s.Complete(ctx, "k", stranger, []byte("not mine"), time.Hour)
	fmt.Println(errors.Is(err, store.ErrLeaseLost))

	_, err = s.Get(ctx, "never-claimed")
	fmt.Println(errors.Is(err, store.ErrNotFound))

	_, err = s.Claim(ctx, "", "", holder, time.Minute)
	fmt.Println(errors.Is(err, store.ErrInvalid), err)
	// Output:
	// true
	// true
	// true memory: claim: invalid argument: empty key
}
