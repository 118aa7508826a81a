package memory_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/internal/storesmoke"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

func TestOpenURL(t *testing.T) {
	for _, u := range []string{"memory://", "memory:", "MEMORY://?sweep=0", "memory://?sweep=10s"} {
		t.Run(u, func(t *testing.T) {
			s, err := store.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close(s) })
			if _, ok := s.(*memory.Store); !ok {
				t.Fatalf("Open(%q) = %T", u, s)
			}
			storesmoke.Run(t, s)
		})
	}
	// Two Opens share nothing.
	a, _ := store.Open(t.Context(), "memory://")
	b, _ := store.Open(t.Context(), "memory://")
	t.Cleanup(func() { store.Close(a); store.Close(b) })
	if _, err := a.Claim(t.Context(), "k", "", store.NewToken(), 60e9); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second memory:// store sees the first's key: %v", err)
	}
}

func TestOpenURLRejects(t *testing.T) {
	for _, u := range []string{"memory://host", "memory:///path", "memory://?sweep=-1s", "memory://?sweep=soon", "memory://?table=x"} {
		t.Run(u, func(t *testing.T) {
			s, err := store.Open(t.Context(), u)
			if !errors.Is(err, store.ErrInvalid) || s != nil {
				t.Fatalf("Open(%q) = %v, %v; want an error matching ErrInvalid", u, s, err)
			}
		})
	}
}
