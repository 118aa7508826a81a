package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamodb"
	"github.com/idemkit/idemkit/storetest"
)

func TestNewRejects(t *testing.T) {
	c := awsdynamodb.New(awsdynamodb.Options{Region: testRegion})
	for name, tc := range map[string]struct {
		client dynamodb.Client
		table  string
		opts   []dynamodb.Option
	}{
		"nil client":      {nil, "keys", nil},
		"short table":     {c, "ab", nil},
		"table with /":    {c, "a/b", nil},
		"nil option":      {c, "keys", []dynamodb.Option{nil}},
		"nil clock":       {c, "keys", []dynamodb.Option{dynamodb.WithClock(nil)}},
		"negative skew":   {c, "keys", []dynamodb.Option{dynamodb.WithClockSkew(-time.Second)}},
		"purge batch 0":   {c, "keys", []dynamodb.Option{dynamodb.WithPurgeBatch(0)}},
		"throttle retry0": {c, "keys", []dynamodb.Option{dynamodb.WithThrottleRetry(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := dynamodb.New(tc.client, tc.table, tc.opts...)
			if !errors.Is(err, store.ErrInvalid) || s != nil {
				t.Fatalf("New = %v, %v; want nil, store.ErrInvalid", s, err)
			}
		})
	}
	if _, err := dynamodb.New(c, "idempotency_keys.v1", dynamodb.WithClockSkew(0)); err != nil {
		t.Fatalf("New with a valid table and options: %v", err)
	}
}

// TestReturnedItemSavesTheRead plays DynamoDB's
// ReturnValuesOnConditionCheckFailure (which dynalite lacks): with the item
// returned by a refused write, the Store decides without a GetItem of its
// own.
func TestReturnedItemSavesTheRead(t *testing.T) {
	w := wrap(localClient(t))
	w.withOld = true
	s := newTable(t, w)
	ctx := t.Context()
	tok, other := store.NewToken(), store.NewToken()
	mustClaim(t, s, "k", "fp", tok, store.Acquired)
	mustClaim(t, s, "k", "fp", other, store.InProgress)
	mustClaim(t, s, "k", "fp2", other, store.Mismatch)
	if err := s.Complete(ctx, "k", other, []byte("x"), time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete by another token = %v, want store.ErrLeaseLost", err)
	}
	for range 2 { // the second is a retried Complete
		if err := s.Complete(ctx, "k", tok, []byte("resp"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c := mustClaim(t, s, "k", "fp", other, store.Completed)
	if string(c.Record.Response) != "resp" {
		t.Fatalf("replayed %q, want resp", c.Record.Response)
	}
	if n := w.count("GetItem"); n != 0 {
		t.Fatalf("the Store made %d GetItem calls; with the returned item it needs none", n)
	}
}

// TestRefusalWithoutItemReadsOnce: where the server returns no item with a
// refusal (dynalite), one strongly consistent GetItem explains it.
func TestRefusalWithoutItemReadsOnce(t *testing.T) {
	w := wrap(localClient(t))
	s := newTable(t, w)
	tok := store.NewToken()
	mustClaim(t, s, "k", "fp", tok, store.Acquired)
	mustClaim(t, s, "k", "fp", store.NewToken(), store.InProgress)
	if n, p := w.count("GetItem"), w.count("PutItem"); n != 1 || p != 2 {
		t.Fatalf("two claims made %d PutItem and %d GetItem calls, want 2 and 1", p, n)
	}
}

func TestThrottledCallsAreRetried(t *testing.T) {
	w := wrap(localClient(t))
	s := newTable(t, w)
	ctx := t.Context()
	tok := store.NewToken()
	w.setThrottle("PutItem", 3)
	mustClaim(t, s, "k", "fp", tok, store.Acquired)
	w.setThrottle("UpdateItem", 3)
	if err := s.Complete(ctx, "k", tok, []byte("r"), time.Minute); err != nil {
		t.Fatalf("Complete through three throttled attempts: %v", err)
	}
	w.setThrottle("GetItem", 3)
	if r, err := s.Get(ctx, "k"); err != nil || r.Status != store.StatusCompleted {
		t.Fatalf("Get through three throttled attempts = %v, %v", r, err)
	}
	tok2 := store.NewToken()
	mustClaim(t, s, "k2", "", tok2, store.Acquired)
	w.setThrottle("DeleteItem", 3)
	if err := s.Release(ctx, "k2", tok2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after a throttled Release = %v, want ErrNotFound", err)
	}
	for op, want := range map[string]int{"PutItem": 5, "UpdateItem": 4, "DeleteItem": 4} {
		if n := w.count(op); n != want {
			t.Errorf("%s was called %d times, want %d", op, n, want)
		}
	}
}

// TestThrottledPastTheLimit: a Complete still throttled after
// WithThrottleRetry is a backend error, never a lost lease, and the claim
// stays as it was.
func TestThrottledPastTheLimit(t *testing.T) {
	w := wrap(localClient(t))
	s := newTable(t, w, dynamodb.WithThrottleRetry(100*time.Millisecond))
	tok := store.NewToken()
	mustClaim(t, s, "k", "fp", tok, store.Acquired)
	w.setThrottle("UpdateItem", 1<<30)
	err := s.Complete(t.Context(), "k", tok, []byte("r"), time.Minute)
	var pte *types.ProvisionedThroughputExceededException
	if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInvalid) || !errors.As(err, &pte) {
		t.Fatalf("Complete throttled throughout = %v; want the throttling error, matching no sentinel", err)
	}
	if r, err := s.Get(t.Context(), "k"); err != nil || r.Status != store.StatusInProgress || r.Token != tok {
		t.Fatalf("after the throttled Complete: Get = %v, %v; want in progress by the claimer", r, err)
	}
}

// TestThrottleBackoffEndsWithContext: a call waiting out throttling returns
// promptly when its context ends.
func TestThrottleBackoffEndsWithContext(t *testing.T) {
	w := wrap(localClient(t))
	s := newTable(t, w, dynamodb.WithThrottleRetry(time.Minute))
	w.setThrottle("PutItem", 1<<30)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim throttled past its deadline = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Claim took %v after its context ended", d)
	}
}

// TestClockSkew: with two processes whose clocks disagree by less than the
// skew allowance, the one ahead cannot take over a lease its holder still
// counts as live; with no allowance it can.
func TestClockSkew(t *testing.T) {
	c := localClient(t)
	const lease, skew, ahead = 10 * time.Second, time.Second, 900 * time.Millisecond
	for _, tc := range []struct {
		skew time.Duration
		want store.Outcome
	}{{skew, store.InProgress}, {0, store.Acquired}} {
		t.Run("skew="+tc.skew.String(), func(t *testing.T) {
			holderClock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			holder := newTable(t, c, dynamodb.WithClock(holderClock.Now), dynamodb.WithClockSkew(tc.skew))
			otherClock := storetest.NewManualClock(holderClock.Now().Add(ahead))
			other, err := dynamodb.New(c, holder.Table(), dynamodb.WithClock(otherClock.Now), dynamodb.WithClockSkew(tc.skew))
			if err != nil {
				t.Fatal(err)
			}
			tok := store.NewToken()
			mustClaim(t, holder, "k", "fp", tok, store.Acquired)
			// Just before the holder's deadline on its own clock.
			holderClock.Advance(lease - 50*time.Millisecond)
			otherClock.Advance(lease - 50*time.Millisecond)
			mustClaim(t, other, "k", "fp", store.NewToken(), tc.want)
			if tc.want == store.InProgress {
				otherClock.Advance(ahead) // now past deadline + skew for the other
				mustClaim(t, other, "k", "fp", store.NewToken(), store.Acquired)
			}
			if err := holder.Complete(t.Context(), "k", tok, []byte("late"), time.Minute); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("the old holder's Complete after a takeover = %v, want store.ErrLeaseLost", err)
			}
		})
	}
}

// TestTTLAttribute: the item's TTL lies an hour past its end plus the skew
// allowance, so DynamoDB never deletes a record a Store still counts as
// live.
func TestTTLAttribute(t *testing.T) {
	c := localClient(t)
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 500, time.UTC))
	s := newTable(t, c, dynamodb.WithClock(clock.Now), dynamodb.WithClockSkew(2*time.Second))
	tok := store.NewToken()
	mustClaim(t, s, "k", "", tok, store.Acquired)
	check := func(end time.Time) {
		t.Helper()
		out, err := c.GetItem(t.Context(), &awsdynamodb.GetItemInput{TableName: aws.String(s.Table()),
			Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "k"}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := out.Item[dynamodb.TTLAttribute].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item has no number %q: %v", dynamodb.TTLAttribute, out.Item)
		}
		ttl, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		min := end.Add(2*time.Second + time.Hour)
		if got := time.Unix(ttl, 0); got.Before(min) || got.After(min.Add(2*time.Second)) {
			t.Fatalf("ttl = %v, want just after %v", got, min)
		}
	}
	check(clock.Now().Add(10*time.Second + store.LapsedKept)) // mustClaim's lease, kept LapsedKept once lapsed
	if err := s.Renew(t.Context(), "k", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	check(clock.Now().Add(time.Minute + store.LapsedKept))
	if err := s.Complete(t.Context(), "k", tok, nil, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	check(clock.Now().Add(48 * time.Hour))
}

// TestCompleteTooLarge: a response over MaxResponseLen is store.ErrInvalid
// before anything is written; one of MaxResponseLen fits in an item next to
// the longest key, fingerprint and token; and the engine records a
// refused response as done without it, so a retry never runs the work
// again.
func TestCompleteTooLarge(t *testing.T) {
	s := newTable(t, localClient(t))
	ctx := t.Context()
	key, fp := strings.Repeat("k", store.MaxKeyLen), strings.Repeat("f", store.MaxFingerprintLen)
	tok := store.Token(strings.Repeat("t", store.MaxTokenLen))
	mustClaim(t, s, key, fp, tok, store.Acquired)
	big := bytes.Repeat([]byte{0xff}, dynamodb.MaxResponseLen+1)
	if err := s.Complete(ctx, key, tok, big, time.Minute); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Complete with %d bytes = %v, want store.ErrInvalid", len(big), err)
	}
	if r, err := s.Get(ctx, key); err != nil || r.Status != store.StatusInProgress {
		t.Fatalf("after the refused Complete: Get = %v, %v; want the claim in progress, unchanged", r, err)
	}
	most := big[:dynamodb.MaxResponseLen]
	if err := s.Complete(ctx, key, tok, most, time.Minute); err != nil {
		t.Fatalf("Complete with MaxResponseLen bytes and the longest key, fingerprint and token: %v", err)
	}
	if r, err := s.Get(ctx, key); err != nil || !bytes.Equal(r.Response, most) {
		t.Fatalf("Get after the largest Complete: %d bytes, %v; want the %d bytes back", len(r.Response), err, len(most))
	}

	e, err := idem.New(s)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	work := func(context.Context) idem.Verdict { runs++; return idem.Keep(big) }
	if _, err := e.Run(ctx, "engine", "", work); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(ctx, "engine", "", work)
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 || !res.NotKept {
		t.Fatalf("after a response too large for an item: the work ran %d times, NotKept = %v; want once, true", runs, res.NotKept)
	}
}

// TestMigrateIsIdempotent: Migrate from several Stores at once, and again,
// leaves one working table.
func TestMigrateIsIdempotent(t *testing.T) {
	c := localClient(t)
	name := tableName(t)
	dropTable(t, name)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := dynamodb.New(c, name)
			if err == nil {
				err = s.Migrate(t.Context())
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s, err := dynamodb.New(c, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "k", "", store.NewToken(), store.Acquired)
}

// TestNoTable: calls on a table that does not exist fail with DynamoDB's
// error, which matches none of the sentinels.
func TestNoTable(t *testing.T) {
	s, err := dynamodb.New(localClient(t), tableName(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Claim(t.Context(), "k", "", store.NewToken(), time.Minute)
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Claim on a missing table = %v, want ResourceNotFoundException", err)
	}
}

func mustClaim(t *testing.T, s store.Store, key, fp string, tok store.Token, want store.Outcome) store.Claim {
	t.Helper()
	c, err := s.Claim(t.Context(), key, fp, tok, 10*time.Second)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if c.Outcome != want {
		t.Fatalf("Claim(%q) = %v, want %v", key, c.Outcome, want)
	}
	return c
}

// TestCheckClock: a clock in step with the server's passes; one an hour
// ahead or behind is refused with ErrClockSkew, by CheckClock and so by
// store.Open's check.
func TestCheckClock(t *testing.T) {
	c := localClient(t)
	s := newTable(t, c)
	if off, err := s.CheckClock(t.Context()); err != nil || off > 2*time.Second || off < -2*time.Second {
		t.Fatalf("CheckClock with the real clock = %v, %v; want nil and an offset within the Date header's second", off, err)
	}
	for _, d := range []time.Duration{time.Hour, -time.Hour, 5 * time.Second} {
		off, err := mustNew(t, c, s.Table(), dynamodb.WithClock(func() time.Time { return time.Now().Add(d) })).CheckClock(t.Context())
		if !errors.Is(err, dynamodb.ErrClockSkew) {
			t.Fatalf("CheckClock with a clock %v off = %v, %v; want ErrClockSkew", d, off, err)
		}
	}
	// Off by less than the allowance (plus the header's second) passes.
	near := mustNew(t, c, s.Table(), dynamodb.WithClock(func() time.Time { return time.Now().Add(3 * time.Second) }), dynamodb.WithClockSkew(5*time.Second))
	if _, err := near.CheckClock(t.Context()); err != nil {
		t.Fatalf("CheckClock 3s off with a 5s allowance: %v", err)
	}
	// A table that does not exist yet still answers with the server's time.
	missing := mustNew(t, c, tableName(t))
	if _, err := missing.CheckClock(t.Context()); err != nil {
		t.Fatalf("CheckClock on a table not created yet: %v", err)
	}
}

func mustNew(t *testing.T, c dynamodb.Client, table string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(c, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPurgePages: Purge goes through every Scan page (a page of two items
// here) and deletes exactly the records that are over: lapsed leases and
// ended retentions, not live claims, live records or renewals.
func TestPurgePages(t *testing.T) {
	c := localClient(t)
	clock := storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newTable(t, c, dynamodb.WithClock(clock.Now), dynamodb.WithPurgeBatch(2))
	ctx := t.Context()
	claim := func(key string, lease time.Duration) store.Token {
		t.Helper()
		tok := store.NewToken()
		if cl, err := s.Claim(ctx, key, "", tok, lease); err != nil || cl.Outcome != store.Acquired {
			t.Fatalf("Claim(%s) = %v, %v", key, cl.Outcome, err)
		}
		return tok
	}
	for i := range 3 {
		claim("lapsing-"+strconv.Itoa(i), time.Minute)
		tok := claim("ending-"+strconv.Itoa(i), time.Hour)
		if err := s.Complete(ctx, "ending-"+strconv.Itoa(i), tok, []byte("r"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	renewed := claim("renewed", time.Minute)
	claim("live", time.Hour)
	clock.Advance(30 * time.Second)
	if _, err := s.Claim(ctx, "renewed", "", renewed, time.Hour); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	n, err := s.Purge(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 (three ended retentions; the lapsed leases stay store.LapsedKept)", n, err)
	}
	for _, k := range []string{"renewed", "live"} {
		if _, err := s.Get(ctx, k); err != nil {
			t.Errorf("Get(%s) after Purge: %v", k, err)
		}
	}
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("a second Purge = %d, %v; want 0", n, err)
	}
	// A takeover counts the kept lapsed lease.
	cl, err := s.Claim(ctx, "lapsing-0", "", store.NewToken(), time.Minute)
	if err != nil || cl.Outcome != store.Acquired || cl.Record.Attempt != 2 {
		t.Fatalf("Claim of a kept lapsed lease = %v attempt %d, %v; want acquired, attempt 2", cl.Outcome, cl.Record.Attempt, err)
	}
	clock.Advance(store.LapsedKept - time.Minute)
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("Purge just before LapsedKept = %d, %v; want 0", n, err)
	}
	clock.Advance(time.Minute + 2*dynamodb.DefaultClockSkew)
	if n, err := s.Purge(ctx); err != nil || n != 2 {
		t.Fatalf("Purge after LapsedKept = %d, %v; want 2 (the lapsed leases no one took over)", n, err)
	}
}
