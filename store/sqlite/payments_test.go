package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/leakcheck"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// The seeds' exercise at the store level: POST /payments with an
// Idempotency-Key, the payment row and the stored response written in one
// transaction.

const paymentsSchema = `CREATE TABLE IF NOT EXISTS payments (
	id      INTEGER PRIMARY KEY,
	user_id INTEGER NOT NULL,
	amount  INTEGER NOT NULL
)`

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

func createPayments(t *testing.T, s *sqlite.Store) {
	t.Helper()
	_, err := s.DB().ExecContext(t.Context(), paymentsSchema)
	require.NoError(t, err)
}

func countPayments(t *testing.T, s *sqlite.Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

func fingerprint(body string) string {
	sum := sha256.Sum256([]byte("POST /payments " + body))
	return hex.EncodeToString(sum[:])
}

// hooks let a test act at points inside the transaction of pay.
type hooks struct {
	beforeClaim func(ctx context.Context) error // runs first in the transaction
	afterInsert func(ctx context.Context) error // runs after the payment row is written
}

// pay runs the payment handler for one request: claim the key, insert the
// payment through TxFrom, complete with the response, all in one InTx.
func pay(ctx context.Context, s store.Transactor, key string, amount int64, h hooks) (payResult, error) {
	body := fmt.Sprintf(`{"amount":%d}`, amount)
	var out payResult
	err := s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		if h.beforeClaim != nil {
			if err := h.beforeClaim(ctx); err != nil {
				return err
			}
		}
		tok := store.NewToken()
		c, err := st.Claim(ctx, key, fingerprint(body), tok, time.Minute)
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
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return errors.New("no transaction in the context")
		}
		p := payment{Amount: amount}
		if err := tx.QueryRowContext(ctx, `INSERT INTO payments (user_id, amount) VALUES (1, ?) RETURNING id`, amount).Scan(&p.ID); err != nil {
			return err
		}
		if h.afterInsert != nil {
			if err := h.afterInsert(ctx); err != nil {
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

// payConcurrently sends n identical requests at once, spread over stores.
func payConcurrently(t *testing.T, stores []*sqlite.Store, n int, key string, h hooks) []payResult {
	t.Helper()
	results := make([]payResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = pay(t.Context(), stores[i%len(stores)], key, 1990, h)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
	}
	return results
}

func checkOnePayment(t *testing.T, s *sqlite.Store, results []payResult) {
	t.Helper()
	assert.Equal(t, 1, countPayments(t, s), "payment rows")
	replayed := 0
	for _, r := range results {
		assert.Equal(t, results[0].ID, r.ID, "every request must see the same payment")
		assert.Equal(t, int64(1990), r.Amount)
		if r.Replayed {
			replayed++
		}
	}
	assert.Equal(t, len(results)-1, replayed, "one request does the work, the others replay")
}

func TestPaymentsTenConcurrentRequests(t *testing.T) {
	s := openFile(t)
	createPayments(t, s)
	results := payConcurrently(t, []*sqlite.Store{s}, 10, "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", hooks{})
	checkOnePayment(t, s, results)

	// The same key with another body is refused, and pays nothing.
	_, err := pay(t.Context(), s, "7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90", 9999, hooks{})
	assert.ErrorIs(t, err, errMismatch)
	assert.Equal(t, 1, countPayments(t, s))
}

// Two Stores on one file stand for two processes: their transactions meet at
// SQLite's write lock and its busy timeout, not at a Store's own queue.
func TestPaymentsTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b := openPath(t, path), openPath(t, path)
	createPayments(t, a)
	results := payConcurrently(t, []*sqlite.Store{a, b}, 10, "k-two-stores", hooks{})
	checkOnePayment(t, a, results)
}

// New on a pool that begins transactions DEFERRED, with a handler that reads
// before it claims: InTx's first statement takes the write lock, so no
// transaction fails with SQLITE_BUSY when it later writes.
func TestPaymentsNewDeferredPoolReadFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deferred.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var stores []*sqlite.Store
	for range 2 { // two Stores on one pool: two processes' worth of writers
		s, err := sqlite.New(db)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		require.NoError(t, s.Migrate(t.Context()))
		stores = append(stores, s)
	}
	createPayments(t, stores[0])
	readFirst := hooks{beforeClaim: func(ctx context.Context) error {
		tx, _ := sqlite.TxFrom(ctx)
		var n int
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n)
	}}
	results := payConcurrently(t, stores, 10, "k-deferred", readFirst)
	checkOnePayment(t, stores[0], results)
}

func TestPaymentsErrorRollsBack(t *testing.T) {
	s := openFile(t)
	createPayments(t, s)
	boom := errors.New("card declined after the insert")
	_, err := pay(t.Context(), s, "k-error", 1990, hooks{afterInsert: func(context.Context) error { return boom }})
	require.ErrorIs(t, err, boom, "InTx returns fn's error")
	assert.Equal(t, 0, countPayments(t, s), "the payment rolled back")
	_, err = s.Get(t.Context(), "k-error")
	assert.ErrorIs(t, err, store.ErrNotFound, "the key is free")

	r, err := pay(t.Context(), s, "k-error", 1990, hooks{})
	require.NoError(t, err)
	assert.False(t, r.Replayed, "the retry really runs")
	assert.Equal(t, 1, countPayments(t, s))
}

func TestPaymentsPanicRollsBack(t *testing.T) {
	s := openFile(t)
	createPayments(t, s)
	recovered := func() (p any) {
		defer func() { p = recover() }()
		_, _ = pay(t.Context(), s, "k-panic", 1990, hooks{afterInsert: func(context.Context) error { panic("handler bug") }})
		return nil
	}()
	assert.Equal(t, "handler bug", recovered, "the panic is re-raised")
	assert.Equal(t, 0, countPayments(t, s), "the payment rolled back")
	_, err := s.Get(t.Context(), "k-panic")
	assert.ErrorIs(t, err, store.ErrNotFound, "the key is free")

	r, err := pay(t.Context(), s, "k-panic", 1990, hooks{})
	require.NoError(t, err)
	assert.False(t, r.Replayed, "the retry really runs")
	assert.Equal(t, 1, countPayments(t, s))

	// The Store still works for others: the failed transaction released its lock.
	r2, err := pay(t.Context(), s, "k-panic", 1990, hooks{})
	require.NoError(t, err)
	assert.True(t, r2.Replayed)
	assert.Equal(t, r.ID, r2.ID)
}

// A duplicate in another "process" (another Store on the file) arrives while
// the first transaction is open: it waits in SQLite's busy handler and then
// replays, instead of failing with SQLITE_BUSY. The hold below is on the real
// clock because the busy wait is what is under test.
func TestPaymentsDuplicateWaitsAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wait.db")
	a, b := openPath(t, path), openPath(t, path)
	createPayments(t, a)
	inserted := make(chan struct{})
	release := make(chan struct{})
	first := make(chan payResult, 1)
	go func() {
		r, err := pay(t.Context(), a, "k-wait", 1990, hooks{afterInsert: func(context.Context) error {
			close(inserted)
			<-release
			return nil
		}})
		assert.NoError(t, err)
		first <- r
	}()
	<-inserted
	second := make(chan payResult, 1)
	started := make(chan struct{})
	var waited time.Duration
	go func() {
		t0 := time.Now()
		close(started)
		r, err := pay(t.Context(), b, "k-wait", 1990, hooks{})
		waited = time.Since(t0)
		assert.NoError(t, err)
		second <- r
	}()
	<-started
	const hold = 150 * time.Millisecond
	time.Sleep(hold)
	close(release)
	r1, r2 := <-first, <-second
	assert.False(t, r1.Replayed)
	assert.True(t, r2.Replayed, "the duplicate replays the committed payment")
	assert.Equal(t, r1.ID, r2.ID)
	// B cannot finish before A commits, which is at least hold after t0.
	assert.GreaterOrEqual(t, waited, hold, "the duplicate waited for the first transaction")
	assert.Equal(t, 1, countPayments(t, a))
}

// Close and reopen the file: completed keys still replay.
func TestPaymentsDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "durable.db")
	s, err := sqlite.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	createPayments(t, s)
	r1, err := pay(t.Context(), s, "k-durable", 1990, hooks{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openPath(t, path)
	require.NoError(t, s.Migrate(t.Context()), "Migrate on an existing table is harmless")
	r2, err := pay(t.Context(), s, "k-durable", 1990, hooks{})
	require.NoError(t, err)
	assert.True(t, r2.Replayed)
	assert.Equal(t, r1.ID, r2.ID)
	assert.Equal(t, 1, countPayments(t, s))
}

// crashEnv makes the test binary, run again as a child, play a process that
// dies: after the commit, before the reply, or inside the transaction.
const crashEnv = "IDEMKIT_SQLITE_CRASH"

// TestMain runs the crash child's body instead of the tests when the test
// binary is started as that child; otherwise it runs the tests and then
// checks that they left no goroutine running (a Store or *sql.DB not closed).
func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(crashEnv); ok {
		crashChild(v)
	}
	if v, ok := os.LookupEnv(migrateEnv); ok {
		migrateChild(v)
	}
	code := m.Run()
	sqlite.RemoveBenchFile()
	if code == 0 {
		if leaked := leakcheck.Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func crashChild(v string) {
	mode, path, _ := strings.Cut(v, ":")
	s, err := sqlite.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	switch mode {
	case "after-commit":
		if _, err := pay(ctx, s, "k-crash-after", 1990, hooks{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	case "before-commit":
		_, _ = pay(ctx, s, "k-crash-before", 1990, hooks{afterInsert: func(context.Context) error {
			os.Exit(3) // the process dies with the transaction open
			return nil
		}})
	}
	os.Exit(3) // no Close, no checkpoint: the process just dies
}

func TestPaymentsSurviveCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	s := openPath(t, path)
	createPayments(t, s)
	for _, mode := range []string{"after-commit", "before-commit"} {
		cmd := exec.CommandContext(t.Context(), os.Args[0])
		cmd.Env = append(os.Environ(), crashEnv+"="+mode+":"+path)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "child %s: %s", mode, out)
		require.Equal(t, 3, exit.ExitCode(), "child %s should die on purpose: %s", mode, out)
	}

	// Crash after the commit: the retry replays the stored payment.
	r, err := pay(t.Context(), s, "k-crash-after", 1990, hooks{})
	require.NoError(t, err)
	assert.True(t, r.Replayed, "a commit that preceded the crash is kept")
	assert.Equal(t, 1, countPayments(t, s))

	// Crash before the commit: the key is not stuck, the retry really runs.
	_, err = s.Get(t.Context(), "k-crash-before")
	assert.ErrorIs(t, err, store.ErrNotFound)
	r, err = pay(t.Context(), s, "k-crash-before", 1990, hooks{})
	require.NoError(t, err)
	assert.False(t, r.Replayed)
	assert.Equal(t, 2, countPayments(t, s))
}
