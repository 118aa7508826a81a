package seal_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/seal"
)

// A sealed store over the memory store: what the memory store holds is
// ciphertext, what the sealed store returns is the response.
func Example() {
	ctx := context.Background()
	keys := seal.NewLocalKeys()
	if err := keys.Add("", "2026-12", seal.NewSecret()); err != nil {
		panic(err)
	}
	inner, _ := memory.New()
	defer inner.Close()
	s, err := seal.New(inner, keys)
	if err != nil {
		panic(err)
	}
	tok := store.NewToken()
	_, _ = s.Claim(ctx, "pay-1", "v1:fingerprint", tok, time.Minute)
	_ = s.Complete(ctx, "pay-1", tok, []byte(`{"card":"4242"}`), time.Hour)

	c, _ := s.Claim(ctx, "pay-1", "v1:fingerprint", store.NewToken(), time.Minute)
	fmt.Println(c.Outcome, string(c.Record.Response))
	raw, _ := inner.Get(ctx, "pay-1")
	fmt.Println(raw.Fingerprint[:11], len(raw.Response) > len(`{"card":"4242"}`))
	// Output:
	// completed {"card":"4242"}
	// s2.2026-12. true
}
