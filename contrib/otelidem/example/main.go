// Command example is the payments exercise with its operations wired in: the
// idempotency middleware reports through otelidem, the OpenTelemetry
// Prometheus exporter serves the metrics at GET /metrics, the cleanup job
// purges expired keys, and logs carry keys hashed, never raw.
//
//	go run ./contrib/otelidem/example                     # memory store, on 127.0.0.1:3001 (-addr to change)
//	go run ./contrib/otelidem/example -store sqlite -db idem.db
//	curl -s localhost:3001/metrics | grep '^idem_'
//
// POST /payments with an Idempotency-Key creates a payment once; GET
// /payments lists them. -wait 0 (the default here) answers a duplicate that
// arrives while the first request runs with 409, so the ten-parallel
// exercise shows one 201 and nine 409s; -delay sets how long the first takes.
// An amount over 100000 cents is declined with a 502, which releases the key.
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemkit/idemkit/contrib/otelidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	Addr       string
	Store      string
	DB         string
	Wait       time.Duration
	Delay      time.Duration
	Retention  time.Duration
	PurgeEvery time.Duration
	// Secret, when set, hashes keys in logs and spans alike in every process
	// (IDEMKIT_KEY_SECRET); otherwise a per-process key.
	Secret string
}

func run(args []string) error {
	cfg := config{Addr: "127.0.0.1:3001", Store: "memory", DB: "idem.db", Retention: 24 * time.Hour, PurgeEvery: 5 * time.Minute,
		Delay: 200 * time.Millisecond, Secret: os.Getenv("IDEMKIT_KEY_SECRET")}
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to serve on")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "where keys live: memory or sqlite")
	fs.StringVar(&cfg.DB, "db", cfg.DB, "SQLite database file (-store sqlite)")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a duplicate waits for the first request before a 409")
	fs.DurationVar(&cfg.Delay, "delay", cfg.Delay, "how long creating a payment takes")
	fs.DurationVar(&cfg.Retention, "retention", cfg.Retention, "how long a completed key is remembered")
	fs.DurationVar(&cfg.PurgeEvery, "purge-every", cfg.PurgeEvery, "interval of the cleanup job")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	return serve(ctx, ln, cfg, os.Stderr)
}

// server is the running example.
type server struct {
	handler http.Handler
	st      store.Store
	close   func()
}

// newServer builds the store, the telemetry, the middleware and the routes.
// The Prometheus registry is the server's own, so tests can build several.
func newServer(cfg config, logger *slog.Logger) (*server, purge.Option, error) {
	redact := keyer.DefaultRedactor()
	if cfg.Secret != "" {
		r, err := keyer.HashKeys([]byte(cfg.Secret))
		if err != nil {
			return nil, nil, err
		}
		redact = r
	}
	// Every line logged with a "key" attribute is written hashed.
	logger = slog.New(keyer.RedactHandler(logger.Handler(), redact))

	var st store.Store
	var closeStore func()
	switch cfg.Store {
	case "memory":
		m, err := memory.New()
		if err != nil {
			return nil, nil, err
		}
		st, closeStore = m, func() { m.Close() }
	case "sqlite":
		s, err := sqlite.Open(cfg.DB)
		if err != nil {
			return nil, nil, err
		}
		if err := s.Migrate(context.Background()); err != nil {
			s.Close()
			return nil, nil, err
		}
		st, closeStore = s, func() { s.Close() }
	default:
		return nil, nil, fmt.Errorf("unknown -store %q: memory or sqlite", cfg.Store)
	}

	// OpenTelemetry metrics, read by the Prometheus exporter.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	tel, err := otelidem.New(otelidem.WithMeterProvider(mp), otelidem.WithBackend(otelidem.Backend(st)),
		otelidem.WithKeyRedactor(redact))
	if err != nil {
		closeStore()
		return nil, nil, err
	}

	led := &ledger{delay: cfg.Delay}
	fp, err := keyer.NewFingerprinter(keyer.WithCanonicalJSON(), keyer.WithMaxBody(64<<10))
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	e, err := idem.New(st, idem.WithTracer(tel), idem.WithWait(cfg.Wait),
		idem.WithRetention(cfg.Retention), idem.WithLogger(logger))
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	mw, err := httpidem.New(e, httpidem.WithFingerprinter(fp))
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw(http.HandlerFunc(led.create)))
	mux.HandleFunc("GET /payments", led.list)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &server{handler: mux, st: st, close: func() {
		mp.Shutdown(context.Background())
		closeStore()
	}}
	return s, purge.WithObserver(tel.PurgeObserver()), nil
}

// serve runs the example on ln until ctx is done.
func serve(ctx context.Context, ln net.Listener, cfg config, logOut *os.File) error {
	logger := slog.New(slog.NewTextHandler(logOut, nil))
	s, observePurge, err := newServer(cfg, logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer s.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	jobDone := make(chan error, 1)
	if p, ok := s.st.(store.Purger); ok {
		go func() {
			jobDone <- purge.Run(ctx, p, purge.WithInterval(cfg.PurgeEvery), purge.WithLogger(logger), observePurge)
		}()
	} else {
		jobDone <- nil
	}

	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("example: serving", "addr", ln.Addr().String(), "store", cfg.Store)
	select {
	case err = <-served:
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(shut)
		cancel()
		<-served
	}
	cancel()
	if jerr := <-jobDone; err == nil || errors.Is(err, http.ErrServerClosed) {
		err = jerr
	}
	return err
}
