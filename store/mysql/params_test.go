package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/mysql"
)

// TestOpenURLUnknownParameters: a parameter that is neither the Store's nor
// the driver's is ErrInvalid before anything connects (the address is one
// where nothing listens: a dial error would mean Open tried), even one the
// driver would have turned into a SET statement.
func TestOpenURLUnknownParameters(t *testing.T) {
	for _, q := range []string{"tabel=x", "password=x", "tx_isolation=x", "Timeout=1s", "var.bad%20name=1", "var.=1", "var.timeout=1&timeout=1s"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := store.Open(ctx, "mysql://root@127.0.0.1:1/test?"+q)
		cancel()
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("?%s: %v, want ErrInvalid", q, err)
		}
	}
}

// TestOpenURLPassesOnPurpose: the driver's own parameters and var.NAME
// session variables reach the server.
func TestOpenURLPassesOnPurpose(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	// root@tcp(127.0.0.1:3306)/test → mysql://root@127.0.0.1:3306/test
	user, rest, _ := strings.Cut(dsn, "@tcp(")
	addr, db, _ := strings.Cut(rest, ")/")
	db, _, _ = strings.Cut(db, "?")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := store.Open(ctx, "mysql://"+user+"@"+addr+"/"+db+"?timeout=5s&var.wait_timeout=1234")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(s)
	var got int
	if err := s.(*mysql.Store).DB().QueryRowContext(ctx, "SELECT @@SESSION.wait_timeout").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != 1234 {
		t.Errorf("wait_timeout = %d, want 1234 from var.wait_timeout", got)
	}
}
