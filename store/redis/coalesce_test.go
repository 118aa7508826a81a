package redis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

// TestConformanceCoalesced runs the suite with coalescing on, on the real
// Redis, the Cluster (where go-redis splits each batch by node) and the
// Cluster with WithReplicas (which sends every call alone).
func TestConformanceCoalesced(t *testing.T) {
	t.Parallel() // see TestConformanceRedis
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) goredis.UniversalClient
		opts   []redis.Option
	}{
		{"Redis", func(t *testing.T) goredis.UniversalClient { return realClient(t) }, nil},
		{"Cluster", func(t *testing.T) goredis.UniversalClient { return clusterClient(t) }, nil},
		{"ClusterReplicas", func(t *testing.T) goredis.UniversalClient { return clusterClient(t) },
			[]redis.Option{redis.WithReplicas(1, time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client(t)
			storetest.Run(t, storetest.Harness{
				New: func(t *testing.T) storetest.Subject {
					opts := append([]redis.Option{redis.WithPrefix(testPrefix(t, c)), redis.WithCoalescing(true)}, tc.opts...)
					return storetest.Subject{Store: redis.MustNew(t, c, opts...)}
				},
				ShortLease: 200 * time.Millisecond,
			})
		})
	}
}

// TestCoalescedOutcomes: many goroutines claim and complete at once through
// one Store with coalescing on, so that their commands share pipelines, and
// each gets its own outcome: in one batch, new keys (Acquired), a key
// another token holds (InProgress), a completed key (Completed, with its
// response), a key claimed with another fingerprint (Mismatch), the
// caller's own key in progress (Acquired again, by renewal); then each
// Complete stores its own response, and one of a key another token holds
// fails with ErrLeaseLost.
func TestCoalescedOutcomes(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]goredis.UniversalClient{"Redis": realClient(t), "Cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t, c)
			s := redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithCoalescing(true), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
			other := store.NewToken()
			// The same keys through a Store that sends every call alone.
			setup := redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithCoalescing(false), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
			for _, k := range []string{"held", "done", "mismatch"} {
				fp := "fp"
				if k == "mismatch" {
					fp = "another-fp"
				}
				if _, err := setup.Claim(ctx, k, fp, other, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			if err := setup.Complete(ctx, "done", other, []byte("the done response"), time.Hour); err != nil {
				t.Fatal(err)
			}
			const goroutines = 64
			for round := range 10 {
				start := make(chan struct{})
				errs := make(chan error, goroutines)
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs <- coalescedCase(ctx, s, start, round, g, other)
					}()
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
				if t.Failed() {
					return
				}
			}
			batches, calls := redis.CoalesceStats(s)
			t.Logf("%d batches of %d calls in all", batches, calls)
			if batches == 0 || calls < 2*batches {
				t.Errorf("%d batches of %d calls: the goroutines' commands were never sent together", batches, calls)
			}
		})
	}
}

// coalescedCase is goroutine g's part of a round of TestCoalescedOutcomes.
func coalescedCase(ctx context.Context, s *redis.Store, start <-chan struct{}, round, g int, other store.Token) error {
	tok := store.NewToken()
	own := fmt.Sprintf("own-%d-%d", round, g)
	if g%5 == 4 {
		// Its own key in progress already: the claim renews it.
		if cl, err := s.Claim(ctx, own, "fp", tok, time.Minute); err != nil || cl.Outcome != store.Acquired {
			return fmt.Errorf("%s: first claim: %v, %v", own, cl.Outcome, err)
		}
	}
	<-start
	var (
		key  string
		want store.Outcome
	)
	switch g % 5 {
	case 0:
		key, want = own, store.Acquired // new
	case 1:
		key, want = "held", store.InProgress
	case 2:
		key, want = "done", store.Completed
	case 3:
		key, want = "mismatch", store.Mismatch
	case 4:
		key, want = own, store.Acquired // renewed
	}
	cl, err := s.Claim(ctx, key, "fp", tok, time.Minute)
	if err != nil {
		return fmt.Errorf("claim %s: %w", key, err)
	}
	if cl.Outcome != want {
		return fmt.Errorf("claim %s: %v, want %v (record %+v)", key, cl.Outcome, want, cl.Record)
	}
	switch want {
	case store.Acquired:
		if cl.Record.Token != tok || cl.Record.Key != key {
			return fmt.Errorf("claim %s: record %+v is not the caller's", key, cl.Record)
		}
		resp := []byte(fmt.Sprintf("response of %s by %s", key, tok))
		if err := s.Complete(ctx, key, tok, resp, time.Minute); err != nil {
			return fmt.Errorf("complete %s: %w", key, err)
		}
		rec, err := s.Get(ctx, key)
		if err != nil || rec.Status != store.StatusCompleted || rec.Token != tok || !bytes.Equal(rec.Response, resp) {
			return fmt.Errorf("%s after its Complete: %+v, %v", key, rec, err)
		}
	case store.Completed:
		if string(cl.Record.Response) != "the done response" || cl.Record.Token != other {
			return fmt.Errorf("replay of %s: %+v", key, cl.Record)
		}
	case store.InProgress:
		if cl.Record.Token != other {
			return fmt.Errorf("claim %s: held by %q, want %q", key, cl.Record.Token, other)
		}
		// Completing a key another token holds: the lease is not ours.
		if err := s.Complete(ctx, key, tok, []byte("intruder"), time.Minute); !errors.Is(err, store.ErrLeaseLost) {
			return fmt.Errorf("complete %s by a token that does not hold it: %v, want ErrLeaseLost", key, err)
		}
	case store.Mismatch:
		if cl.Record.Fingerprint != "another-fp" {
			return fmt.Errorf("mismatch on %s: fingerprint %q", key, cl.Record.Fingerprint)
		}
	}
	return nil
}
