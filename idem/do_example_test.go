package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

// provider stands for a payment provider that accepts an idempotency key of
// its own, as Stripe and Adyen do.
type provider struct{ charges map[string]string }

type charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func (p *provider) Charge(ctx context.Context, idempotencyKey string, amount int) (charge, error) {
	if id, ok := p.charges[idempotencyKey]; ok {
		return charge{ID: id, Amount: amount}, nil
	}
	id := fmt.Sprintf("ch_%d", len(p.charges)+1)
	p.charges[idempotencyKey] = id
	return charge{ID: id, Amount: amount}, nil
}

// A charge forwarded to a provider with the same key: the first call
// charges; retries get the kept charge back without calling the provider.
// Forwarding the key covers the one case Do cannot: a crash after the
// provider charged and before the result was kept.
func ExampleDo() {
	ctx := context.Background()
	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		panic(err)
	}
	p := &provider{charges: map[string]string{}}
	calls := 0
	pay := func(key string, amount int) (charge, error) {
		return idem.Do(ctx, e, key, func(ctx context.Context) (charge, error) {
			calls++
			return p.Charge(ctx, key, amount)
		}, idem.WithScope("user-42"), idem.WithFingerprint(fmt.Sprint("amount=", amount)))
	}
	for range 3 {
		c, err := pay("order-1", 1990)
		fmt.Println(c.ID, c.Amount, err)
	}
	_, err = pay("order-1", 5000)
	fmt.Println(errors.Is(err, idem.ErrMismatch))
	fmt.Println("provider calls:", calls)
	// Output:
	// ch_1 1990 <nil>
	// ch_1 1990 <nil>
	// ch_1 1990 <nil>
	// true
	// provider calls: 1
}

// A job runner on an at-least-once queue: every job runs once however many
// times it is delivered; a job that fails is released and runs again on its
// next delivery.
func ExampleDo_jobRunner() {
	ctx := context.Background()
	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		panic(err)
	}
	type report struct{ Rows int }
	failOnce := map[string]bool{"job-2": true}
	run := func(job string) {
		r, err := idem.Do(ctx, e, job, func(ctx context.Context) (report, error) {
			if failOnce[job] {
				delete(failOnce, job)
				return report{}, errors.New("database busy")
			}
			fmt.Println("running", job)
			return report{Rows: len(job) * 10}, nil
		}, idem.WithScope("nightly-export"))
		if err != nil {
			fmt.Println(job, "failed:", err)
			return
		}
		fmt.Println(job, "done:", r.Rows, "rows")
	}
	for _, job := range []string{"job-1", "job-2", "job-1", "job-2", "job-2"} {
		run(job)
	}
	// Output:
	// running job-1
	// job-1 done: 50 rows
	// job-2 failed: database busy
	// job-1 done: 50 rows
	// running job-2
	// job-2 done: 50 rows
	// job-2 done: 50 rows
}
