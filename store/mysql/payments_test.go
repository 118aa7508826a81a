package mysql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// The seeds' exercise at the store level: POST /payments with an
// Idempotency-Key, the payment row and the stored response written in one
// transaction.

var (
	errMismatch   = errors.New("422: Idempotency-Key reused with a different request")
	errInProgress = errors.New("409: a request with this Idempotency-Key is in progress")
)

type payment struct {
	ID     int64 `json:"id"`
	Amount int64 `json:"amount"`
}

type payResult struct {
	payment
	Replayed bool
}

// bank is a Store and the payments table its handler writes.
type bank struct {
	s        *Store
	payments string
}

func newBank(t *testing.T) bank {
	t.Helper()
	s := newTestStore(t, testDB(t))
	payments := "`" + uniqueName("idemkit_my_payments_") + "`"
	_, err := testDB(t).ExecContext(t.Context(), "CREATE TABLE "+payments+
		" (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = testDB(t).ExecContext(context.Background(), "DROP TABLE IF EXISTS "+payments) })
	return bank{s: s, payments: payments}
}

func (b bank) count(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, testDB(t).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+b.payments).Scan(&n))
	return n
}

func payFingerprint(body string) string {
	sum := sha256.Sum256([]byte("POST /payments " + body))
	return hex.EncodeToString(sum[:])
}

// pay runs the payment handler for one request: claim the key, insert the
// payment through TxFrom, complete with the response, all in one InTx.
// afterInsert, when set, runs after the payment row is written.
func (b bank) pay(ctx context.Context, key string, amount int64, afterInsert func(ctx context.Context) error) (payResult, error) {
	body := fmt.Sprintf(`{"amount":%d}`, amount)
	var out payResult
	err := b.s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		out = payResult{}
		tok := store.NewToken()
		c, err := st.Claim(ctx, key, payFingerprint(body), tok, time.Minute)
		if err != nil {
			return err
		}
		switch c.Outcome {
		case store.Completed:
			out.Replayed = true
			return json.Unmarshal(c.Record.Response, &out.payment)
		case store.Mismatch:
			return errMismatch
		case store.InProgress:
			return errInProgress
		}
		tx, ok := TxFrom(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO "+b.payments+" (user_id, amount) VALUES (1, ?)", amount)
		if err != nil {
			return err
		}
		p := payment{Amount: amount}
		if p.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		if afterInsert != nil {
			if err := afterInsert(ctx); err != nil {
				return err
			}
		}
		resp, err := json.Marshal(p)
		if err != nil {
			return err
		}
		out.payment = p
		return st.Complete(ctx, key, tok, resp, 24*time.Hour)
	})
	return out, err
}

// TestPaymentsTenConcurrentRequests: ten identical requests at once make one
// payment; nine wait for its commit and replay it.
func TestPaymentsTenConcurrentRequests(t *testing.T) {
	b := newBank(t)
	const n = 10
	results := make([]payResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = b.pay(t.Context(), "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", 1990, func(context.Context) error {
				time.Sleep(20 * time.Millisecond) // the work: give the duplicates time to arrive
				return nil
			})
		})
	}
	close(start)
	wg.Wait()
	replayed := 0
	for i := range n {
		require.NoError(t, errs[i], "request %d", i)
		assert.Equal(t, results[0].ID, results[i].ID, "every request sees the same payment")
		assert.Equal(t, int64(1990), results[i].Amount)
		if results[i].Replayed {
			replayed++
		}
	}
	assert.Equal(t, n-1, replayed, "one request does the work, the others replay")
	assert.Equal(t, 1, b.count(t), "payment rows")
	// The claim's LAST_INSERT_ID(expr) does not leak into the id the
	// handler's own AUTO_INCREMENT insert reports.
	var id int64
	require.NoError(t, testDB(t).QueryRowContext(t.Context(), "SELECT id FROM "+b.payments).Scan(&id))
	assert.Equal(t, id, results[0].ID, "the payment's id as LastInsertId reported it")

	_, err := b.pay(t.Context(), "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", 9999, nil)
	assert.ErrorIs(t, err, errMismatch, "the same key with another body is refused")
	assert.Equal(t, 1, b.count(t))
}

// TestPaymentsErrorRollsBack: an error after the insert leaves no payment
// and a free key; the retry runs for real.
func TestPaymentsErrorRollsBack(t *testing.T) {
	b := newBank(t)
	boom := errors.New("card declined after the insert")
	_, err := b.pay(t.Context(), "k-error", 1990, func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom, "InTx returns fn's error")
	assert.Equal(t, 0, b.count(t), "the payment rolled back")
	_, err = b.s.Get(t.Context(), "k-error")
	assert.ErrorIs(t, err, store.ErrNotFound, "the key is free")
	r, err := b.pay(t.Context(), "k-error", 1990, nil)
	require.NoError(t, err)
	assert.False(t, r.Replayed, "the retry really runs")
	assert.Equal(t, 1, b.count(t))
}

// TestPaymentsPanicRollsBack: a panic after the insert is re-raised, and
// leaves no payment and a free key.
func TestPaymentsPanicRollsBack(t *testing.T) {
	b := newBank(t)
	recovered := func() (p any) {
		defer func() { p = recover() }()
		_, _ = b.pay(t.Context(), "k-panic", 1990, func(context.Context) error { panic("handler bug") })
		return nil
	}()
	assert.Equal(t, "handler bug", recovered)
	assert.Equal(t, 0, b.count(t))
	_, err := b.s.Get(t.Context(), "k-panic")
	assert.ErrorIs(t, err, store.ErrNotFound)
	r, err := b.pay(t.Context(), "k-panic", 1990, nil)
	require.NoError(t, err)
	assert.False(t, r.Replayed)
}

// TestPaymentsWaitingDuplicate: a duplicate that arrives while the first
// transaction is open waits on the key's row lock, then replays the
// committed payment; after a rollback instead, it pays itself.
func TestPaymentsWaitingDuplicate(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "rollback"}[commit], func(t *testing.T) {
			b := newBank(t)
			inside, finish := make(chan struct{}), make(chan struct{})
			first := make(chan error, 1)
			go func() {
				_, err := b.pay(t.Context(), "k-wait", 1990, func(context.Context) error {
					close(inside)
					<-finish
					if !commit {
						return errRollback
					}
					return nil
				})
				first <- err
			}()
			<-inside
			type result struct {
				r   payResult
				err error
			}
			second := make(chan result, 1)
			go func() {
				r, err := b.pay(t.Context(), "k-wait", 1990, nil)
				second <- result{r, err}
			}()
			// The duplicate is blocked on the row lock until the first ends.
			waitBlocked(t, b.s.Table())
			select {
			case r := <-second:
				t.Fatalf("the duplicate did not wait for the first transaction: %+v, %v", r.r, r.err)
			default:
			}
			close(finish)
			if commit {
				require.NoError(t, <-first)
			} else {
				require.ErrorIs(t, <-first, errRollback)
			}
			r := <-second
			require.NoError(t, r.err)
			assert.Equal(t, commit, r.r.Replayed, "a duplicate replays a commit and pays after a rollback")
			assert.Equal(t, 1, b.count(t))
		})
	}
}
