package redis_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// TestListSkipsForeignKeys: a hash, a string that is not a record, and a
// staging-shaped key under the Store's prefix are skipped, not failures,
// and a record under another prefix is not listed.
func TestListSkipsForeignKeys(t *testing.T) {
	_, c := newMini(t)
	s := redis.MustNew(t, c, redis.WithPrefix("p:"), redis.WithEvictionCheck(false))
	other := redis.MustNew(t, c, redis.WithPrefix("q:"), redis.WithEvictionCheck(false))
	ctx := t.Context()
	if _, err := s.Claim(ctx, "mine", "fp", store.NewToken(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Claim(ctx, "theirs", "fp", store.NewToken(), time.Minute); err != nil {
		t.Fatal(err)
	}
	c.HSet(ctx, "p:hash", "f", "v")
	c.Set(ctx, "p:garbage", "not a record", 0)
	c.Set(ctx, "p:{p:mine}:stage:ABCDEFGHIJ:1", "x", 0)
	p, err := s.List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 1 || p.Entries[0].Key != "mine" || p.Entries[0].State != store.StateInProgress {
		t.Fatalf("List = %+v, want the one record \"mine\" in progress", p.Entries)
	}
	if p, err := s.List(ctx, store.ListOptions{State: store.StateLapsed}); err != nil || len(p.Entries) != 0 {
		t.Fatalf("List(lapsed) = %+v, %v; want nothing: no lease has lapsed", p, err)
	}
}
