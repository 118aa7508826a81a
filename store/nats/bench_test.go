package nats_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkPaired measures the Store against the same work written by hand
// with nats.go's KV API on the same connection and server
// (IDEMKIT_NATS_URL), in alternating phases (internal/pairbench), and
// reports store-ops/s, raw-ops/s and store/raw:
//
//	go test -run '^$' -bench Paired -benchtime 2000x -count 5 ./store/nats/
//
// One ClaimComplete op is a Claim and a Complete of a new key; by hand, a
// kv.Create of the in-progress value, a kv.Get and a kv.Update over its
// revision. One Replay op is a Claim of a completed key; by hand, a
// kv.Create that fails and a kv.Get. On this R1 bucket the Store reads
// with direct gets as kv.Get does; on a replicated bucket it asks the
// stream's leader instead (STREAM.MSG.GET, a JetStream API request), since
// a direct get may be answered by a replica that lags.
func BenchmarkPaired(b *testing.B) {
	nc := connect(b, natsURL(b))
	ctx := context.Background()
	s := newStore(b, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, s.Bucket())
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR","created":1764464523}`)
	inProgress := []byte("in progress fp token")
	completed := append([]byte("completed fp token "), resp...)
	var run atomic.Int64
	for _, bc := range []struct {
		name string
		ops  func(b *testing.B) (storeOp, rawOp func(i int) error)
	}{
		{"ClaimComplete", func(b *testing.B) (func(int) error, func(int) error) {
			r := run.Add(1)
			tok := store.NewToken()
			storeOp := func(i int) error {
				key := fmt.Sprintf("s%d-%d", r, i)
				c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
				if err != nil {
					return err
				}
				if c.Outcome != store.Acquired {
					return fmt.Errorf("claim %s: %v", key, c.Outcome)
				}
				return s.Complete(ctx, key, tok, resp, 5*time.Minute)
			}
			rawOp := func(i int) error {
				key := fmt.Sprintf("r%d-%d", r, i)
				if _, err := kv.Create(ctx, key, inProgress); err != nil {
					return err
				}
				e, err := kv.Get(ctx, key)
				if err != nil {
					return err
				}
				_, err = kv.Update(ctx, key, completed, e.Revision())
				return err
			}
			return storeOp, rawOp
		}},
		{"Replay", func(b *testing.B) (func(int) error, func(int) error) {
			tok := store.NewToken()
			if _, err := s.Claim(ctx, "replay", "fp", tok, time.Minute); err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, "replay", tok, resp, time.Hour); err != nil && !errors.Is(err, store.ErrLeaseLost) {
				b.Fatal(err)
			}
			if _, err := kv.Put(ctx, "raw-replay", completed); err != nil {
				b.Fatal(err)
			}
			storeOp := func(int) error {
				c, err := s.Claim(ctx, "replay", "fp", store.NewToken(), time.Minute)
				if err == nil && c.Outcome != store.Completed {
					err = fmt.Errorf("replay: %v", c.Outcome)
				}
				return err
			}
			rawOp := func(int) error {
				_, err := kv.Create(ctx, "raw-replay", inProgress)
				if !errors.Is(err, jetstream.ErrKeyExists) {
					return fmt.Errorf("create of a completed key: %v", err)
				}
				_, err = kv.Get(ctx, "raw-replay")
				return err
			}
			return storeOp, rawOp
		}},
	} {
		for _, w := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/workers=%d", bc.name, w), func(b *testing.B) {
				storeOp, rawOp := bc.ops(b)
				st, raw := pairbench.Run(b, b.N, w, 256, storeOp, rawOp)
				if st.N == 0 || raw.N == 0 {
					return
				}
				storeRate := float64(st.N) / st.Elapsed.Seconds()
				rawRate := float64(raw.N) / raw.Elapsed.Seconds()
				b.ReportMetric(storeRate, "store-ops/s")
				b.ReportMetric(rawRate, "raw-ops/s")
				b.ReportMetric(storeRate/rawRate, "store/raw")
			})
		}
	}
}
