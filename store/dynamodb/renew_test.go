package dynamodb_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamodb"
	"github.com/idemkit/idemkit/storetest"
)

// rawItem returns key's item as the table holds it (nil for none).
func rawItem(t *testing.T, c dynamodb.Client, s *dynamodb.Store, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(context.Background(), &awsdynamodb.GetItemInput{TableName: aws.String(s.Table()),
		Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: key}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// clients returns the two ways the tests reach the server: plain
// (dynalite: a refusal hands no item back) and with the refused item
// handed back as DynamoDB does.
func clients(t *testing.T) map[string]dynamodb.Client {
	c := localClient(t)
	w := wrap(c)
	w.withOld = true
	return map[string]dynamodb.Client{"Plain": c, "ReturnedItem": w}
}

// TestRenew checks every case of Renew's row of the state table: only a
// live lease held by the token is extended, attempt and fence kept;
// everything else is store.ErrLeaseLost and writes nothing.
func TestRenew(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := newTable(t, c, dynamodb.WithClock(clock.Now))
			ctx := t.Context()
			refused := func(key string, tok store.Token) {
				t.Helper()
				before := rawItem(t, c, s, key)
				if err := s.Renew(ctx, key, tok, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("Renew(%s) = %v, want store.ErrLeaseLost", key, err)
				}
				if after := rawItem(t, c, s, key); !reflect.DeepEqual(before, after) {
					t.Fatalf("a refused Renew(%s) wrote: %v, was %v", key, after, before)
				}
			}

			tok := store.NewToken()
			first := mustClaim(t, s, "live", "fp", tok, store.Acquired)
			clock.Advance(5 * time.Second)
			if err := s.Renew(ctx, "live", tok, time.Minute); err != nil {
				t.Fatal(err)
			}
			r, err := s.Get(ctx, "live")
			if err != nil {
				t.Fatal(err)
			}
			want := clock.Now().Add(time.Minute + dynamodb.DefaultClockSkew)
			if !r.LockedUntil.Equal(want) || !r.ExpiresAt.Equal(want) {
				t.Fatalf("renewed lease ends %v (expires %v), want %v", r.LockedUntil, r.ExpiresAt, want)
			}
			if r.Attempt != first.Record.Attempt || r.Fence != first.Record.Fence || r.Attempt != 1 {
				t.Fatalf("Renew changed attempt/fence: %d/%d, was %d/%d", r.Attempt, r.Fence, first.Record.Attempt, first.Record.Fence)
			}
			clock.Advance(30 * time.Second) // past the first lease, within the renewed one
			mustClaim(t, s, "live", "fp", store.NewToken(), store.InProgress)

			refused("never", tok)
			if it := rawItem(t, c, s, "never"); it != nil {
				t.Fatalf("Renew created an item: %v", it)
			}

			rel := store.NewToken()
			mustClaim(t, s, "released", "fp", rel, store.Acquired)
			if err := s.Release(ctx, "released", rel); err != nil {
				t.Fatal(err)
			}
			refused("released", rel)
			if it := rawItem(t, c, s, "released"); it != nil {
				t.Fatalf("Renew revived a released key: %v", it)
			}

			lap := store.NewToken()
			mustClaim(t, s, "lapsed", "fp", lap, store.Acquired) // mustClaim's lease is 10s
			clock.Advance(11*time.Second + dynamodb.DefaultClockSkew)
			refused("lapsed", lap)

			done := store.NewToken()
			mustClaim(t, s, "completed", "fp", done, store.Acquired)
			if err := s.Complete(ctx, "completed", done, []byte("r"), time.Hour); err != nil {
				t.Fatal(err)
			}
			refused("completed", done)

			mustClaim(t, s, "other", "fp", store.NewToken(), store.Acquired)
			refused("other", store.NewToken())

			for _, bad := range []struct {
				key   string
				tok   store.Token
				lease time.Duration
			}{{"", tok, time.Minute}, {"k", "", time.Minute}, {"k", tok, 0}, {"k", tok, -time.Second}} {
				if err := s.Renew(ctx, bad.key, bad.tok, bad.lease); !errors.Is(err, store.ErrInvalid) {
					t.Errorf("Renew(%q, %q, %v) = %v, want store.ErrInvalid", bad.key, bad.tok, bad.lease, err)
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			before := rawItem(t, c, s, "live")
			if err := s.Renew(cctx, "live", tok, time.Hour); !errors.Is(err, context.Canceled) {
				t.Fatalf("Renew with a cancelled context = %v, want context.Canceled", err)
			}
			if after := rawItem(t, c, s, "live"); !reflect.DeepEqual(before, after) {
				t.Fatal("Renew with a cancelled context wrote")
			}
		})
	}
}

// TestTakeover: a takeover of a lapsed lease is attempt 2 with a larger
// fence; the first holder's Complete and Renew are refused and its Release
// is a no-op (of its lapsed lease too, before the takeover); a completed
// record keeps its attempt and fence; a claim over an expired record or
// after a release counts from 1.
func TestTakeover(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			clock := storetest.NewManualClock(start)
			s := newTable(t, c, dynamodb.WithClock(clock.Now))
			ctx := t.Context()
			first, second := store.NewToken(), store.NewToken()
			c1 := mustClaim(t, s, "k", "fp", first, store.Acquired)
			if c1.Record.Attempt != 1 || c1.Record.Fence != uint64(start.UnixMicro()) || c1.Takeover() {
				t.Fatalf("fresh claim: attempt %d fence %d, want 1 and %d", c1.Record.Attempt, c1.Record.Fence, start.UnixMicro())
			}
			clock.Advance(time.Second)
			again := mustClaim(t, s, "k", "fp", first, store.Acquired)
			if again.Record.Attempt != 1 || again.Record.Fence != c1.Record.Fence {
				t.Fatalf("re-entrant claim: attempt %d fence %d, want %d and %d", again.Record.Attempt, again.Record.Fence, 1, c1.Record.Fence)
			}
			clock.Advance(time.Minute)
			if err := s.Release(ctx, "k", first); err != nil {
				t.Fatal(err)
			}
			if rawItem(t, c, s, "k") == nil {
				t.Fatal("Release deleted a lapsed lease")
			}
			c2 := mustClaim(t, s, "k", "fp", second, store.Acquired)
			if c2.Record.Attempt != 2 || c2.Record.Fence <= c1.Record.Fence || !c2.Takeover() {
				t.Fatalf("takeover: attempt %d fence %d, want 2 and more than %d", c2.Record.Attempt, c2.Record.Fence, c1.Record.Fence)
			}
			if err := s.Complete(ctx, "k", first, []byte("stale"), time.Hour); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("the first holder's Complete = %v, want store.ErrLeaseLost", err)
			}
			if err := s.Renew(ctx, "k", first, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("the first holder's Renew = %v, want store.ErrLeaseLost", err)
			}
			if err := s.Release(ctx, "k", first); err != nil {
				t.Fatal(err)
			}
			r, err := s.Get(ctx, "k")
			if err != nil || r.Token != second || r.Attempt != 2 || r.Fence != c2.Record.Fence {
				t.Fatalf("Get = %+v, %v; want the second holder's lease, attempt 2", r, err)
			}
			if err := s.Complete(ctx, "k", second, []byte("ok"), time.Minute); err != nil {
				t.Fatal(err)
			}
			r, err = s.Get(ctx, "k")
			if err != nil || r.Attempt != 2 || r.Fence != c2.Record.Fence {
				t.Fatalf("completed: %+v, %v; want attempt 2, fence %d", r, err, c2.Record.Fence)
			}
			clock.Advance(2 * time.Minute)
			c3 := mustClaim(t, s, "k", "fp", store.NewToken(), store.Acquired)
			if c3.Record.Attempt != 1 || c3.Record.Fence <= c2.Record.Fence {
				t.Fatalf("claim over an expired record: attempt %d fence %d, want 1 and more than %d", c3.Record.Attempt, c3.Record.Fence, c2.Record.Fence)
			}
			// The takeover of a takeover counts on.
			clock.Advance(time.Minute)
			c4 := mustClaim(t, s, "k", "fp", store.NewToken(), store.Acquired)
			clock.Advance(time.Minute)
			c5 := mustClaim(t, s, "k", "fp", store.NewToken(), store.Acquired)
			if c4.Record.Attempt != 2 || c5.Record.Attempt != 3 || c5.Record.Fence <= c4.Record.Fence {
				t.Fatalf("attempts %d, %d, want 2, 3 with growing fences", c4.Record.Attempt, c5.Record.Attempt)
			}
			tok := store.NewToken()
			mustClaim(t, s, "rel", "fp", tok, store.Acquired)
			if err := s.Release(ctx, "rel", tok); err != nil {
				t.Fatal(err)
			}
			if c := mustClaim(t, s, "rel", "fp", store.NewToken(), store.Acquired); c.Record.Attempt != 1 {
				t.Fatalf("claim after a release: attempt %d, want 1", c.Record.Attempt)
			}
		})
	}
}

// TestConcurrentTakeover: of many claims racing to take over one lapsed
// lease exactly one acquires it, as attempt 2.
func TestConcurrentTakeover(t *testing.T) {
	c := localClient(t)
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newTable(t, c, dynamodb.WithClock(clock.Now))
	mustClaim(t, s, "k", "fp", store.NewToken(), store.Acquired)
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			cl, err := s.Claim(context.Background(), "k", "fp", store.NewToken(), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if cl.Outcome == store.Acquired {
				mu.Lock()
				won++
				mu.Unlock()
				if cl.Record.Attempt != 2 {
					t.Errorf("the winner's attempt is %d, want 2", cl.Record.Attempt)
				}
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims took over the lapsed lease, want 1", won)
	}
}

// TestRenewRacesRelease: a heartbeat that reaches the table around the
// holder's Release never keeps the key: after both, the key is free and
// the next claim acquires it as attempt 1.
func TestRenewRacesRelease(t *testing.T) {
	c := localClient(t)
	s := newTable(t, c)
	ctx := t.Context()
	for i := range 30 {
		key := "race" + strconv.Itoa(i)
		tok := store.NewToken()
		mustClaim(t, s, key, "fp", tok, store.Acquired)
		var wg sync.WaitGroup
		var renewErr, releaseErr error
		start := make(chan struct{})
		wg.Go(func() { <-start; renewErr = s.Renew(ctx, key, tok, time.Hour) })
		wg.Go(func() { <-start; releaseErr = s.Release(ctx, key, tok) })
		close(start)
		wg.Wait()
		if releaseErr != nil || (renewErr != nil && !errors.Is(renewErr, store.ErrLeaseLost)) {
			t.Fatalf("round %d: Release %v, Renew %v", i, releaseErr, renewErr)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("round %d: Get after Release = %v (Renew %v), want store.ErrNotFound", i, err, renewErr)
		}
		if cl := mustClaim(t, s, key, "fp", store.NewToken(), store.Acquired); cl.Record.Attempt != 1 {
			t.Fatalf("round %d: attempt %d after a release, want 1", i, cl.Record.Attempt)
		}
	}
	tok := store.NewToken()
	mustClaim(t, s, "late", "fp", tok, store.Acquired)
	if err := s.Release(ctx, "late", tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, "late", tok, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew after Release = %v, want store.ErrLeaseLost", err)
	}
	if cl := mustClaim(t, s, "late", "fp", store.NewToken(), store.Acquired); cl.Record.Attempt != 1 {
		t.Fatalf("attempt %d after a release and a late renewal, want 1", cl.Record.Attempt)
	}
}

// TestItemsWithoutAttempt: items written before Attempt and Fence (no a,
// no n attribute) still read (Attempt 0, Fence 0), renew, complete and are
// taken over as attempt 2; DynamoDB being schemaless, no migration is
// needed.
func TestItemsWithoutAttempt(t *testing.T) {
	c := localClient(t)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := storetest.NewManualClock(start)
	s := newTable(t, c, dynamodb.WithClock(clock.Now))
	ctx := t.Context()
	put := func(key string, status string, tok store.Token, end time.Time, resp []byte) {
		t.Helper()
		n := func(v int64) types.AttributeValue {
			return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
		}
		item := map[string]types.AttributeValue{
			"k": &types.AttributeValueMemberS{Value: key}, "f": &types.AttributeValueMemberS{Value: "fp"},
			"t": &types.AttributeValueMemberS{Value: string(tok)}, "s": &types.AttributeValueMemberN{Value: status},
			"e": n(end.UnixNano()), "ttl": n(end.Add(time.Hour).Unix()),
		}
		if status == "1" {
			item["l"] = n(end.UnixNano())
		} else if resp != nil {
			item["r"] = &types.AttributeValueMemberB{Value: resp}
		}
		if _, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	tok := store.NewToken()
	put("live", "1", tok, start.Add(time.Minute), nil)
	r, err := s.Get(ctx, "live")
	if err != nil || r.Attempt != 0 || r.Fence != 0 || r.Token != tok {
		t.Fatalf("Get of an old lease = %+v, %v; want attempt 0, fence 0", r, err)
	}
	if err := s.Renew(ctx, "live", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cl := mustClaim(t, s, "live", "fp", tok, store.Acquired); cl.Record.Attempt != 0 || cl.Record.Fence != 0 {
		t.Fatalf("re-entrant claim of an old lease: attempt %d fence %d, want 0 and 0", cl.Record.Attempt, cl.Record.Fence)
	}
	if err := s.Complete(ctx, "live", tok, []byte("r"), time.Minute); err != nil {
		t.Fatal(err)
	}
	put("done", "2", tok, start.Add(time.Hour), []byte("old"))
	if cl := mustClaim(t, s, "done", "fp", store.NewToken(), store.Completed); string(cl.Record.Response) != "old" || cl.Record.Attempt != 0 {
		t.Fatalf("replay of an old record: %q attempt %d", cl.Record.Response, cl.Record.Attempt)
	}
	put("lapsed", "1", tok, start.Add(time.Second), nil)
	put("expired", "2", tok, start.Add(time.Second), []byte("x"))
	clock.Advance(2 * time.Second)
	if cl := mustClaim(t, s, "lapsed", "fp", store.NewToken(), store.Acquired); cl.Record.Attempt != 2 || cl.Record.Fence < uint64(start.UnixMicro()) {
		t.Fatalf("takeover of an old lease: attempt %d fence %d, want 2 and the clock", cl.Record.Attempt, cl.Record.Fence)
	}
	if cl := mustClaim(t, s, "expired", "fp", store.NewToken(), store.Acquired); cl.Record.Attempt != 1 {
		t.Fatalf("claim over an old expired record: attempt %d, want 1", cl.Record.Attempt)
	}
}
