package httpidemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/internal/brokenidem"
)

// Check runs the rules outside a test. Here the endpoint is a middleware
// that ignores the scope: one caller's key replays another caller's answer,
// and the scope rule says so.
func ExampleCheck() {
	app := brokenidem.NewApp(brokenidem.Options{Break: "scope/separate"})
	results, err := httpidemtest.Check(context.Background(), app.Target(), "replay/identical", "scope/separate")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r.Rule, r.Verdict)
	}
	// Output:
	// replay/identical pass
	// scope/separate fail
}

// Control holds or fails an in-process handler where it is about to take
// effect, for the in-flight and not-kept rules.
func ExampleControl() {
	var ctl httpidemtest.Control
	var mu sync.Mutex
	payments := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := ctl.Enter(r.Context()); status != 0 {
			http.Error(w, "failing on purpose", status)
			return
		}
		mu.Lock()
		payments++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	tg := httpidemtest.Target{
		Handler:   handler, // wrap it in your idempotency middleware
		Path:      "/payments",
		Body:      func() []byte { return []byte(`{"amount":1990}`) },
		OtherBody: func() []byte { return []byte(`{"amount":5}`) },
		Count: func(context.Context) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return payments, nil
		},
		Hold: ctl.Hold,
		Fail: ctl.Fail,
	}
	// Without a middleware, a request without a key takes effect:
	results, _ := httpidemtest.Check(context.Background(), tg, "keys/missing")
	fmt.Println(results[0].Rule, results[0].Verdict)
	// Output: keys/missing fail
}
