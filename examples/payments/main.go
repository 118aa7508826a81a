// Command payments is the seeds' exercise as a runnable server: POST
// /payments with an Idempotency-Key creates a payment once, however many
// times the request is retried, and GET /payments lists them so anyone can
// count.
//
//	go run ./examples/payments                      # SQLite in ./payments.db, on :3000
//	go run ./examples/payments -store memory
//	go run ./examples/payments -store postgres -postgres postgres://localhost/test
//	go run ./examples/payments -store redis -redis 127.0.0.1:6379
//
// With SQLite and PostgreSQL the payment row, the key and the stored response
// commit in one transaction; with memory and Redis the middleware uses leases
// and duplicates that arrive while the first request runs wait for it and
// replay its answer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	addr := fs.String("addr", ":3000", "address to serve on")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "where keys and payments live: sqlite, memory, postgres or redis")
	fs.StringVar(&cfg.DB, "db", cfg.DB, "SQLite database file (-store sqlite)")
	fs.StringVar(&cfg.PostgresURL, "postgres", cfg.PostgresURL, "PostgreSQL URL (-store postgres; default $IDEMKIT_POSTGRES_URL)")
	fs.StringVar(&cfg.RedisAddr, "redis", cfg.RedisAddr, "Redis host:port (-store redis; default $IDEMKIT_REDIS_ADDR)")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a duplicate waits for the first request before a 409")
	delay := fs.Duration("delay", 0, "handler latency after a payment is created and before it answers (chaos runs)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()
	a.delay = *delay

	srv := &http.Server{Addr: *addr, Handler: a.routes(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("serving payments", "addr", *addr, "store", a.describe)
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
