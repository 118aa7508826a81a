package store_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/memory" // registers memory://
)

// The store comes from configuration: the same code opens, prepares and
// closes any backend the program imports.
func ExampleOpen() {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory://?sweep=30s") // or sqlite:///var/lib/app/keys.db, postgres://..., redis://...
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(st)
	if err := store.Migrate(ctx, st); err != nil { // a no-op for memory
		log.Fatal(err)
	}
	c, err := st.Claim(ctx, "order-42", "", store.NewToken(), time.Minute)
	fmt.Println(c.Outcome, err)

	_, err = store.Open(ctx, "memory://?tabel=x")
	fmt.Println(err)
	// Output:
	// acquired <nil>
	// store: open memory://?tabel=x: memory: invalid argument: unknown parameter(s) tabel
}
