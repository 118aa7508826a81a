package httpidem_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/mysql"
)

// mysqlPayments is the middleware on a MySQL/MariaDB store of its own, with
// a payments handler that writes through mysql.TxFrom (transactional mode),
// or in the process (lease mode).
type mysqlPayments struct {
	db       *sql.DB
	payments string
	handler  http.Handler
	mu       sync.Mutex
	runs     int
	fail     bool // the handler answers 500 after its insert
}

func newMySQLPayments(t *testing.T, opts ...any) *mysqlPayments {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	suffix := strings.ToLower(rand.Text()[:12])
	s, err := mysql.New(db, mysql.WithTable("httpidem_keys_"+suffix))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	p := &mysqlPayments{db: db, payments: "httpidem_payments_" + suffix}
	_, err = db.ExecContext(t.Context(), "CREATE TABLE "+p.payments+" (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount BIGINT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Close()
		_, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+p.payments+", "+s.Table())
		assert.NoError(t, err)
	})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.runs++
		fail := p.fail
		p.mu.Unlock()
		var id int64
		if tx, ok := mysql.TxFrom(r.Context()); ok {
			res, err := tx.ExecContext(r.Context(), "INSERT INTO "+p.payments+" (amount) VALUES (1990)")
			if err == nil {
				id, err = res.LastInsertId()
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // the work: let duplicates arrive meanwhile
		if fail {
			http.Error(w, "card network down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	p.handler = mustNew(t, s, opts...)(inner)
	return p
}

func (p *mysqlPayments) post(key string) (int, string, string) {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1990}`))
	r.Header.Set("Idempotency-Key", `"`+key+`"`)
	w := httptest.NewRecorder()
	p.handler.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Body)
	return w.Code, w.Header().Get("Idempotent-Replayed"), string(body)
}

func (p *mysqlPayments) count(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, p.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+p.payments).Scan(&n))
	return n
}

// TestMySQLTransactional: ten identical POSTs at once in transactional mode
// run the handler once and write one payment; the other nine wait for its
// commit and replay the same answer.
func TestMySQLTransactional(t *testing.T) {
	p := newMySQLPayments(t, httpidem.WithTransactions(), idem.WithWait(10*time.Second))
	const n = 10
	type answer struct{ code, replayed, body string }
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			code, replayed, body := p.post("7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90")
			answers[i] = answer{fmt.Sprint(code), replayed, body}
		})
	}
	close(start)
	wg.Wait()
	replays := 0
	for _, a := range answers {
		assert.Equal(t, "201", a.code)
		assert.Equal(t, answers[0].body, a.body, "every request gets the same payment")
		if a.replayed == "true" {
			replays++
		}
	}
	assert.Equal(t, n-1, replays)
	assert.Equal(t, 1, p.runs, "handler runs")
	assert.Equal(t, 1, p.count(t), "payment rows")
}

// TestMySQLTransactional5xxRollsBack: a 5xx rolls back the handler's insert
// with the key, so the retry runs and pays once.
func TestMySQLTransactional5xxRollsBack(t *testing.T) {
	p := newMySQLPayments(t, httpidem.WithTransactions())
	p.fail = true
	code, _, _ := p.post("k-5xx")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, 0, p.count(t), "the 5xx rolled the payment back")
	p.fail = false
	code, replayed, _ := p.post("k-5xx")
	assert.Equal(t, http.StatusCreated, code)
	assert.Empty(t, replayed, "the retry really ran")
	assert.Equal(t, 1, p.count(t))
	assert.Equal(t, 2, p.runs)
}

// TestMySQLLeaseMode: without WithTransactions the MySQL store holds
// leases, and a retry after the first answer replays it.
func TestMySQLLeaseMode(t *testing.T) {
	p := newMySQLPayments(t)
	code, replayed, body := p.post("k-lease")
	assert.Equal(t, http.StatusCreated, code)
	assert.Empty(t, replayed)
	code2, replayed2, body2 := p.post("k-lease")
	assert.Equal(t, http.StatusCreated, code2)
	assert.Equal(t, "true", replayed2)
	assert.Equal(t, body, body2)
	assert.Equal(t, 1, p.runs)
	assert.Equal(t, 0, p.count(t), "lease mode: no transaction for the handler")
}
