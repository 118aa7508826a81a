package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
)

// TestOpenURLUnknownParameters: a parameter that is neither the Store's nor
// pgx's is ErrInvalid before anything connects (nothing listens at the
// address: a dial error would mean Open tried).
func TestOpenURLUnknownParameters(t *testing.T) {
	for _, q := range []string{"tabel=x", "work_mem=64MB", "SSLMODE=disable", "var.bad%20name=1", "var.=1", "var.search_path=a&search_path=b"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := store.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2&"+q)
		cancel()
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("?%s: %v, want ErrInvalid", q, err)
		}
	}
}

// TestOpenURLPassesOnPurpose: pgx's parameters and var.NAME server
// settings reach the server.
func TestOpenURLPassesOnPurpose(t *testing.T) {
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("var.work_mem", "3MB")
	q.Set("application_name", "idemkit-params-test")
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(s)
	pool := s.(*postgres.Store).DB().(*pgxpool.Pool)
	var mem, app string
	if err := pool.QueryRow(ctx, "SELECT current_setting('work_mem'), current_setting('application_name')").Scan(&mem, &app); err != nil {
		t.Fatal(err)
	}
	if mem != "3MB" || app != "idemkit-params-test" {
		t.Errorf("work_mem %q, application_name %q: want 3MB and idemkit-params-test", mem, app)
	}
}
