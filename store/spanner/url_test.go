package spanner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/seedtest"
	"github.com/idemkit/idemkit/store"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{
		"spanner://",
		"spanner://projects/p",
		"spanner://projects/p/instances/i",
		"spanner://projects/p/instances/i/databases/",
		"spanner://projects/p/instances/i/databases/d/extra",
		"spanner://user@projects/p/instances/i/databases/d",
		"spanner://projects:9010/p/instances/i/databases/d",
		"spanner://projects/p/instances/i/databases/d?tabel=x",
		"spanner://projects/p/instances/i/databases/d?table=a-b",
		"spanner://projects/p/instances/i/databases/d?purge_batch=0",
		"spanner://projects/p/instances/i/databases/d?purge_batch=many",
	} {
		s, err := store.Open(context.Background(), u)
		if !errors.Is(err, store.ErrInvalid) {
			store.Close(s)
			t.Errorf("Open(%q): %v, want store.ErrInvalid", u, err)
		}
	}
}

// openTest opens the shared test database by URL, with a table of its own,
// and migrates it.
func openTest(t *testing.T) store.Store {
	t.Helper()
	db, _ := testDB(t)
	ctx := context.Background()
	s, err := store.Open(ctx, "spanner://"+db+"?table="+uniqueName("u_"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(s) })
	if err := store.Migrate(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, s); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	return s
}

func TestOpen(t *testing.T) {
	s := openTest(t)
	if !strings.HasPrefix(s.(*Store).Table(), "u_") {
		t.Fatalf("table %q, want the URL's", s.(*Store).Table())
	}
	ctx := context.Background()
	tok := store.NewToken()
	if c, err := s.Claim(ctx, "k", "fp", tok, time.Minute); err != nil || c.Outcome != store.Acquired {
		t.Fatalf("Claim: %v, %v", c.Outcome, err)
	}
}

// TestSeeds runs the seeds' exercise on a store chosen only by its URL: ten
// parallel identical POSTs make one payment, a retry replays, another body
// is 422, ten deliveries of one message apply it once.
func TestSeeds(t *testing.T) {
	seedtest.Run(t, openTest(t))
}
