package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/sqlite"
)

// config says which store the demo uses and where.
type config struct {
	Store       string        // sqlite, memory, postgres, redis
	DB          string        // SQLite file
	PostgresURL string        // PostgreSQL URL
	RedisAddr   string        // Redis host:port
	Wait        time.Duration // WithWait for duplicates in flight

	// Names, so tests sharing a database never collide.
	PaymentsTable string // SQL stores: the payments table
	KeysTable     string // SQL stores: the idemkit table ("" = the store's default)
	RedisPrefix   string // Redis: key prefix ("" = the store's default)

	hook  func(httpidem.Event) // tests observe the middleware
	extra []httpidem.Option    // tests add middleware options (a short lease)
}

func defaultConfig() config {
	return config{
		Store:         "sqlite",
		DB:            "payments.db",
		PostgresURL:   os.Getenv("IDEMKIT_POSTGRES_URL"),
		RedisAddr:     os.Getenv("IDEMKIT_REDIS_ADDR"),
		Wait:          10 * time.Second,
		PaymentsTable: "payments",
	}
}

// open connects the store named by cfg.Store and the ledger that goes with
// it: each store is one case here. SQL stores keep payments in a table of the
// same database, written in the middleware's transaction; memory and Redis
// keep them in the process.
func open(ctx context.Context, cfg config, logger *slog.Logger) (*app, error) {
	var (
		st       store.Store
		led      ledger
		closers  []func()
		describe string
	)
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*app, error) {
		closeAll()
		return nil, err
	}
	switch cfg.Store {
	case "sqlite":
		var opts []sqlite.Option
		if cfg.KeysTable != "" {
			opts = append(opts, sqlite.WithTable(cfg.KeysTable))
		}
		s, err := sqlite.Open(cfg.DB, opts...)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			return fail(err)
		}
		l, err := newSQLiteLedger(ctx, s.DB(), cfg.PaymentsTable)
		if err != nil {
			return fail(err)
		}
		st, led, describe = s, l, "sqlite "+cfg.DB
	case "postgres":
		if cfg.PostgresURL == "" {
			return fail(fmt.Errorf("-store postgres needs -postgres URL or IDEMKIT_POSTGRES_URL"))
		}
		pool, err := pgxpool.New(ctx, cfg.PostgresURL)
		if err != nil {
			return fail(fmt.Errorf("postgres: %w", err))
		}
		closers = append(closers, pool.Close)
		var opts []postgres.Option
		if cfg.KeysTable != "" {
			opts = append(opts, postgres.WithTable(cfg.KeysTable))
		}
		s, err := postgres.New(pool, opts...)
		if err != nil {
			return fail(err)
		}
		if err := s.Migrate(ctx); err != nil {
			return fail(err)
		}
		l, err := newPostgresLedger(ctx, pool, cfg.PaymentsTable)
		if err != nil {
			return fail(err)
		}
		st, led, describe = s, l, "postgres"
	case "memory":
		s := memory.New()
		closers = append(closers, func() { s.Close() })
		st, led, describe = s, &memLedger{}, "memory"
	case "redis":
		if cfg.RedisAddr == "" {
			return fail(fmt.Errorf("-store redis needs -redis host:port or IDEMKIT_REDIS_ADDR"))
		}
		// ContextTimeoutEnabled: a request's cancelled context ends its Redis call.
		client := goredis.NewClient(&goredis.Options{Addr: cfg.RedisAddr, ContextTimeoutEnabled: true})
		closers = append(closers, func() { client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			return fail(fmt.Errorf("redis %s: %w", cfg.RedisAddr, err))
		}
		opts := []redis.Option{redis.WithLogger(logger)}
		if cfg.RedisPrefix != "" {
			opts = append(opts, redis.WithPrefix(cfg.RedisPrefix))
		}
		st, led, describe = redis.New(client, opts...), &memLedger{}, "redis "+cfg.RedisAddr
	default:
		return fail(fmt.Errorf("unknown -store %q: use sqlite, memory, postgres or redis", cfg.Store))
	}
	return newApp(st, led, cfg, logger, describe, closeAll)
}
