package mysql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

const racers = 64

var isolations = []string{"REPEATABLE-READ", "READ-COMMITTED"}

// TestRaceLeaseMode: 64 goroutines claim one new key at once with distinct
// tokens, at both isolation levels: exactly one acquires, every other one
// sees InProgress with the winner's token, and nobody gets an error.
func TestRaceLeaseMode(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso, func(t *testing.T) {
			db := openDB(t, racers, withIsolation(t, iso))
			s := newTestStore(t, db)
			ctx := t.Context()
			start := make(chan struct{})
			results := make(chan store.Claim, racers)
			errs := make(chan error, racers)
			var wg sync.WaitGroup
			for range racers {
				wg.Go(func() {
					<-start
					c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
					if err != nil {
						errs <- err
						return
					}
					results <- c
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			close(results)
			for err := range errs {
				t.Errorf("Claim: %v", err)
			}
			var winners []store.Token
			var others []store.Claim
			for c := range results {
				if c.Outcome == store.Acquired {
					winners = append(winners, c.Record.Token)
				} else {
					others = append(others, c)
				}
			}
			require.Len(t, winners, 1, "exactly one of %d concurrent claims acquires", racers)
			for _, c := range others {
				assert.Equal(t, store.InProgress, c.Outcome)
				assert.Equal(t, winners[0], c.Record.Token, "the loser sees the winner's claim")
			}
		})
	}
}

// TestRaceLeaseChurn: 64 goroutines keep claiming one key and releasing it
// when they get it, so INSERTs race DELETEs of the same key, the pattern that
// makes InnoDB deadlock. Nobody gets an error, no two goroutines ever hold
// the key at once, and the deadlocks the server reported were retried.
func TestRaceLeaseChurn(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso, func(t *testing.T) {
			db := openDB(t, racers, withIsolation(t, iso))
			s := newTestStore(t, db)
			ctx := t.Context()
			var (
				holders, maxHolders, acquisitions atomic.Int64
				wg                                sync.WaitGroup
			)
			start := make(chan struct{})
			errs := make(chan error, racers)
			for range racers {
				wg.Go(func() {
					<-start
					for range 20 {
						tok := store.NewToken()
						c, err := s.Claim(ctx, "k", "fp", tok, time.Minute)
						if err != nil {
							errs <- err
							return
						}
						if c.Outcome != store.Acquired {
							continue
						}
						acquisitions.Add(1)
						if h := holders.Add(1); h > maxHolders.Load() {
							maxHolders.Store(h)
						}
						holders.Add(-1)
						if err := s.Release(ctx, "k", tok); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%v", err)
			}
			assert.EqualValues(t, 1, maxHolders.Load(), "the key had more than one holder at a time")
			assert.Positive(t, acquisitions.Load())
			t.Logf("%s: %d acquisitions, %d autocommit statements retried after a deadlock",
				iso, acquisitions.Load(), s.stats.deadlocks.Load())
		})
	}
}

var errRollback = errors.New("test: roll back")

// TestRaceTransactions: 64 InTx claim one key at once, at both isolation
// levels. The first three transactions that acquire it write a payment and
// then fail, so their rollback releases 60-odd waiters at once (InnoDB's
// deadlock case); the fourth completes. Exactly one payment commits, every
// other transaction replays it, nothing fails but the three planned
// rollbacks, and the deadlocks were absorbed by InTx running the
// transaction again.
func TestRaceTransactions(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso, func(t *testing.T) {
			db := openDB(t, racers, withIsolation(t, iso))
			s := newTestStore(t, db)
			payments := uniqueName("idemkit_my_pay_")
			_, err := db.ExecContext(t.Context(), "CREATE TABLE "+payments+" (id BIGINT AUTO_INCREMENT PRIMARY KEY, who VARBINARY(64) NOT NULL) ENGINE=InnoDB")
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = testDB(t).ExecContext(context.Background(), "DROP TABLE IF EXISTS "+payments) })

			var (
				failures  atomic.Int64
				replays   atomic.Int64
				acquired  atomic.Int64
				wg        sync.WaitGroup
				mu        sync.Mutex
				responses = map[string]int{}
			)
			start := make(chan struct{})
			errs := make(chan error, racers)
			for range racers {
				wg.Go(func() {
					<-start
					err := s.InTx(t.Context(), func(ctx context.Context, st store.Store) error {
						tok := store.NewToken()
						c, err := st.Claim(ctx, "k", "fp", tok, time.Minute)
						if err != nil {
							return err
						}
						switch c.Outcome {
						case store.Completed:
							replays.Add(1)
							mu.Lock()
							responses[string(c.Record.Response)]++
							mu.Unlock()
							return nil
						case store.Acquired:
						default:
							return fmt.Errorf("outcome %v, want acquired or completed", c.Outcome)
						}
						tx, _ := TxFrom(ctx)
						if _, err := tx.ExecContext(ctx, "INSERT INTO "+payments+" (who) VALUES (?)", string(tok)); err != nil {
							return err
						}
						if failures.Add(1) <= 3 {
							return errRollback
						}
						acquired.Add(1)
						return st.Complete(ctx, "k", tok, []byte("paid by "+string(tok)), time.Hour)
					})
					if err != nil && !errors.Is(err, errRollback) {
						errs <- err
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("InTx: %v", err)
			}
			var n int
			var who string
			require.NoError(t, db.QueryRowContext(t.Context(), "SELECT COUNT(*), COALESCE(MAX(who), '') FROM "+payments).Scan(&n, &who))
			assert.Equal(t, 1, n, "committed payments")
			assert.EqualValues(t, 1, acquired.Load(), "transactions that completed the key")
			assert.EqualValues(t, racers-1-3, replays.Load(), "transactions that replayed")
			assert.Equal(t, map[string]int{"paid by " + who: racers - 4}, responses, "every replay is the committed payment")
			t.Logf("%s: %d transactions run again after a deadlock", iso, s.stats.txRetries.Load())
		})
	}
}
