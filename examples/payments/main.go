// Command payments is the seeds' exercise as a runnable server: POST
// /payments with an Idempotency-Key creates a payment once, however many
// times the request is retried, GET /payments lists them so anyone can
// count, and GET /payments/{id} (the Location of a new payment) shows one.
//
//	go run ./examples/payments                      # SQLite in ./payments.db, on 127.0.0.1:3000
//	go run ./examples/payments -store-url memory://
//	go run ./examples/payments -store-url 'postgres://localhost/test?sslmode=disable'
//	go run ./examples/payments -store-url redis://127.0.0.1:6379/0
//	go run ./examples/payments -store-url redis+cluster://127.0.0.1:7101,127.0.0.1:7102/
//	go run ./examples/payments -addr :3000          # every interface, not only loopback
//
// -store sqlite|memory|postgres|redis (with -db, -postgres, -redis) is a
// shorthand for the same URLs.
//
// Keys are kept for -retention (default 24h); on stores that can purge
// (SQLite, PostgreSQL, MySQL, memory) a cleanup job deletes expired keys every
// -purge-every (default 5m, 0 disables it; Redis expires keys itself). Log
// lines name keys hashed, never raw.
//
// With SQLite, PostgreSQL and MySQL the payment row, the key and the stored
// response commit in one transaction (-mode tx, the default); with memory and
// Redis, or with -mode lease on any store, the middleware uses leases of
// -lease (default 30s, renewed while the handler runs), and duplicates that
// arrive while the first request runs wait for it and replay its answer. In
// lease mode the payment commits before the key is completed: a demo killed
// in between leaves the key in flight until its lease lapses, and the retry
// then takes it over and pays again (see the README's "Lease mode").
//
// A request body may ask for a slow answer: {"amount":1990,"slow_ms":30000}
// holds the answer 30 s after the payment is made (instead of -delay).
//
// It logs the address it listens on ("serving payments addr=..."): with
// -addr 127.0.0.1:0 the system picks a free port.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, addr, err := parseArgs(args)
	if err != nil {
		return err
	}
	return serve(cfg, addr)
}

// parseArgs reads the command line into the demo's config and the address
// to serve on.
func parseArgs(args []string) (config, string, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:3000", "address to serve on (\":3000\" for every interface)")
	fs.StringVar(&cfg.StoreURL, "store-url", cfg.StoreURL, "the store's URL: memory://, sqlite:///path.db, postgres://..., redis://..., redis+cluster://h1:p1,h2:p2/ (overrides -store)")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "shorthand for -store-url: sqlite, memory, postgres or redis")
	fs.StringVar(&cfg.DB, "db", cfg.DB, "SQLite database file (-store sqlite)")
	fs.StringVar(&cfg.PostgresURL, "postgres", cfg.PostgresURL, "PostgreSQL URL (-store postgres; default $IDEMKIT_POSTGRES_URL)")
	fs.StringVar(&cfg.MySQLDSN, "mysql", cfg.MySQLDSN, "MySQL/MariaDB DSN (-store mysql; default $IDEMKIT_MYSQL_DSN)")
	fs.StringVar(&cfg.RedisAddr, "redis", cfg.RedisAddr, "Redis host:port (-store redis; default $IDEMKIT_REDIS_ADDR)")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a duplicate waits for the first request before a 409")
	fs.DurationVar(&cfg.Delay, "delay", cfg.Delay, "handler latency after a payment is created and before it answers (chaos runs)")
	fs.DurationVar(&cfg.Retention, "retention", cfg.Retention, "how long a key and its response are kept and replayed")
	fs.DurationVar(&cfg.PurgeEvery, "purge-every", cfg.PurgeEvery, "how often the cleanup job deletes expired keys (0 disables it; Redis expires keys itself)")
	fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "tx: one transaction for the payment and the key where the store has them (SQL), leases elsewhere; lease: leases on every store")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "how long a claim holds a key without renewal (lease mode; 0: the engine's default, 30s)")
	fs.StringVar(&cfg.PaymentsTable, "payments-table", cfg.PaymentsTable, "the SQL stores' table of payments")
	wrapFlags(fs, &cfg.Wrap)
	if err := fs.Parse(args); err != nil {
		return config{}, "", err
	}
	if fs.NArg() > 0 {
		return config{}, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.Retention <= 0 {
		return config{}, "", fmt.Errorf("-retention %v is not positive", cfg.Retention)
	}
	if cfg.PurgeEvery < 0 {
		return config{}, "", fmt.Errorf("-purge-every %v is negative (0 disables the cleanup job)", cfg.PurgeEvery)
	}
	if cfg.Mode != modeTx && cfg.Mode != modeLease {
		return config{}, "", fmt.Errorf("-mode %q: want tx or lease", cfg.Mode)
	}
	if cfg.Lease < 0 || (cfg.Lease > 0 && cfg.Lease < 10*time.Millisecond) {
		return config{}, "", fmt.Errorf("-lease %v: want at least 10ms (0 for the engine's default)", cfg.Lease)
	}
	if cfg.PaymentsTable == "" {
		return config{}, "", errors.New("-payments-table is empty")
	}
	return cfg, *addr, nil
}

func serve(cfg config, addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(logHandler(slog.NewTextHandler(os.Stderr, nil)))
	a, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()
	stopPurge := a.startPurge(ctx)
	defer stopPurge() // before a.close: the job stops before the store closes

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	lease := cfg.Lease
	if lease == 0 {
		lease = idem.DefaultLease
	}
	logger.Info("serving payments", "addr", ln.Addr().String(), "store", a.describe, "mode", cfg.Mode, "lease", lease,
		"retention", cfg.Retention, "purge_every", cfg.PurgeEvery)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// logHandler wraps h so that no line carries a raw idempotency key: a value
// logged under "key" by the demo's own code is hashed with the process's
// secret, and keys idemkit's packages already logged hashed pass unchanged
// (keyer.RedactHandler leaves keyer.IsHashed values alone).
func logHandler(h slog.Handler) slog.Handler {
	return keyer.RedactHandler(h, nil, "key")
}
