package spanner

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkPaired measures the Store against the same Spanner SDK calls
// written by hand (the same read statement in a read-write transaction and
// the same mutation, without the Store's checks, decoding and decisions),
// in alternating phases on one client (internal/pairbench), and reports
// each side's throughput and their ratio. One op is a Claim+Complete of a
// new key, or one replay (a Claim that finds the key completed):
//
//	SPANNER_EMULATOR_HOST=127.0.0.1:9010 go test -run '^$' -bench Paired -benchtime 400x -count 3 ./store/spanner/
//
// Against the emulator the numbers say what the Store adds on the client,
// not what Spanner costs: the emulator runs one transaction at a time and
// answers in microseconds.
func BenchmarkPaired(b *testing.B) {
	_, client := testDB(b)
	for _, bc := range []struct {
		name string
		ops  func(b *testing.B, s *Store) (storeOp, rawOp func(i int) error)
	}{
		{"ClaimComplete", claimCompleteOps},
		{"Replay", replayOps},
	} {
		for _, w := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", bc.name, w), func(b *testing.B) {
				storeOp, rawOp := bc.ops(b, newStoreOn(b, client))
				st, raw := pairbench.Run(b, b.N, w, 32, storeOp, rawOp)
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

var benchResponse = []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR","created":1764464523}`)

// rawRead is the Store's read statement, run by hand in tx.
func rawRead(ctx context.Context, s *Store, tx *sp.ReadWriteTransaction, key string) (time.Time, error) {
	var now time.Time
	err := tx.Query(ctx, sp.Statement{SQL: s.q.read, Params: map[string]any{"Key": key}}).Do(func(r *sp.Row) error {
		return r.Column(0, &now)
	})
	return now, err
}

// rawTx runs f in a read-write transaction through the Store's gate, as
// the Store's own transactions run.
func rawTx(ctx context.Context, s *Store, f func(ctx context.Context, tx *sp.ReadWriteTransaction) error) error {
	leave, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	_, err = s.client.ReadWriteTransaction(ctx, f)
	return err
}

func claimCompleteOps(b *testing.B, s *Store) (func(int) error, func(int) error) {
	ctx := context.Background()
	tok := store.NewToken()
	return func(i int) error {
			key := "s" + strconv.Itoa(i)
			c, err := s.Claim(ctx, key, "fp", tok, time.Minute)
			if err != nil || c.Outcome != store.Acquired {
				return fmt.Errorf("claim: %v, %v", c.Outcome, err)
			}
			return s.Complete(ctx, key, tok, benchResponse, time.Hour)
		}, func(i int) error {
			key := "r" + strconv.Itoa(i)
			err := rawTx(ctx, s, func(ctx context.Context, tx *sp.ReadWriteTransaction) error {
				now, err := rawRead(ctx, s, tx, key)
				if err != nil {
					return err
				}
				until := now.Add(time.Minute)
				return tx.BufferWrite([]*sp.Mutation{sp.InsertOrUpdate(s.table, columns,
					[]any{key, "fp", string(tok), int64(statusInProgress), []byte(nil), until, until})})
			})
			if err != nil {
				return err
			}
			return rawTx(ctx, s, func(ctx context.Context, tx *sp.ReadWriteTransaction) error {
				now, err := rawRead(ctx, s, tx, key)
				if err != nil {
					return err
				}
				return tx.BufferWrite([]*sp.Mutation{sp.InsertOrUpdate(s.table, columns,
					[]any{key, "fp", string(tok), int64(statusCompleted), benchResponse, sp.NullTime{}, now.Add(time.Hour)})})
			})
		}
}

func replayOps(b *testing.B, s *Store) (func(int) error, func(int) error) {
	ctx := context.Background()
	tok := store.NewToken()
	if _, err := s.Claim(ctx, "replay", "fp", tok, time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, "replay", tok, benchResponse, time.Hour); err != nil {
		b.Fatal(err)
	}
	other := store.NewToken()
	return func(int) error {
			c, err := s.Claim(ctx, "replay", "fp", other, time.Minute)
			if err == nil && c.Outcome != store.Completed {
				err = fmt.Errorf("replay: %v", c.Outcome)
			}
			return err
		}, func(int) error {
			return rawTx(ctx, s, func(ctx context.Context, tx *sp.ReadWriteTransaction) error {
				_, err := rawRead(ctx, s, tx, "replay")
				return err
			})
		}
}
