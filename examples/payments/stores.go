package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/purge"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/postgres"
	"github.com/idemkit/idemkit/store/sqlite"

	// The backends the demo can open by URL: each registers its schemes.
	_ "github.com/idemkit/idemkit/store/memory"
	_ "github.com/idemkit/idemkit/store/redis"
)

// maxBody is the largest request body the demo fingerprints (and so
// accepts): the 1 MiB its README and httpidem's default promise.
const maxBody = 1 << 20

// config says which store the demo uses and where.
type config struct {
	// StoreURL opens the store (see store.Open): memory://,
	// sqlite:///path/keys.db, postgres://..., redis://..., redis+cluster://...
	// When empty, it is built from the shorthand fields below.
	StoreURL string

	Store       string        // shorthand: sqlite, memory, postgres, redis
	DB          string        // SQLite file
	PostgresURL string        // PostgreSQL URL
	MySQLDSN    string        // MySQL/MariaDB DSN (user:password@tcp(host:port)/db)
	RedisAddr   string        // Redis host:port
	Wait        time.Duration // WithWait for duplicates in flight
	Delay       time.Duration // handler latency after the payment, before the answer (-delay)
	Retention   time.Duration // how long a key and its response are kept (-retention)
	PurgeEvery  time.Duration // how often expired keys are purged (-purge-every; 0: never)
	Mode        string        // -mode: modeTx (transactions where the store has them) or modeLease
	Lease       time.Duration // -lease: the engine's lease (0: idem.DefaultLease)

	// Names, so tests sharing a database never collide.
	PaymentsTable string // SQL stores: the payments table
	KeysTable     string // shorthand SQL stores: the idemkit table ("" = the store's default)
	RedisPrefix   string // shorthand Redis: key prefix ("" = the store's default)

	Wrap wrapConfig // -cache, -seal-key-file (wrap.go)

	tracer idem.Tracer    // tests observe the engine
	purge  purge.Observer // tests observe the cleanup job
	extra  []idem.Option  // tests add engine options (a short lease)
}

func defaultConfig() config {
	return config{
		Store:         "sqlite",
		DB:            "payments.db",
		PostgresURL:   os.Getenv("IDEMKIT_POSTGRES_URL"),
		MySQLDSN:      os.Getenv("IDEMKIT_MYSQL_DSN"),
		RedisAddr:     os.Getenv("IDEMKIT_REDIS_ADDR"),
		Wait:          10 * time.Second,
		Retention:     idem.DefaultRetention,
		PurgeEvery:    purge.DefaultInterval,
		PaymentsTable: "payments",
		Mode:          modeTx,
	}
}

// The modes of -mode.
const (
	// modeTx: on SQLite, PostgreSQL and MySQL the payment, the key and the
	// stored response commit in one transaction; memory and Redis, which
	// have none, use leases. The default.
	modeTx = "tx"
	// modeLease: leases on every store. The payment commits on its own
	// before the key is completed: a crash in between leaves a lapsed key
	// whose retry takes it over and pays again.
	modeLease = "lease"
)

// storeURL returns cfg.StoreURL, or the URL the shorthand -store flag and
// its companions describe.
func (cfg config) storeURL() (string, error) {
	if cfg.StoreURL != "" {
		return cfg.StoreURL, nil
	}
	q := url.Values{}
	switch cfg.Store {
	case "sqlite":
		if cfg.KeysTable != "" {
			q.Set("table", cfg.KeysTable)
		}
		return (&url.URL{Scheme: "sqlite", Opaque: cfg.DB, RawQuery: q.Encode()}).String(), nil
	case "memory":
		return "memory://", nil
	case "postgres":
		if cfg.PostgresURL == "" {
			return "", fmt.Errorf("-store postgres needs -postgres URL or IDEMKIT_POSTGRES_URL")
		}
		u, err := url.Parse(cfg.PostgresURL)
		if err != nil {
			return "", fmt.Errorf("-postgres: %w", err)
		}
		if cfg.KeysTable != "" {
			q := u.Query()
			q.Set("table", cfg.KeysTable)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	case "mysql":
		return mysqlStoreURL(cfg.MySQLDSN, cfg.KeysTable)
	case "redis":
		if cfg.RedisAddr == "" {
			return "", fmt.Errorf("-store redis needs -redis host:port or IDEMKIT_REDIS_ADDR")
		}
		if cfg.RedisPrefix != "" {
			q.Set("prefix", cfg.RedisPrefix)
		}
		return (&url.URL{Scheme: "redis", Host: cfg.RedisAddr, RawQuery: q.Encode()}).String(), nil
	}
	return "", fmt.Errorf("unknown -store %q: use sqlite, memory, postgres, mysql or redis, or -store-url", cfg.Store)
}

// open opens the store from its URL, whatever the backend, and the ledger
// that goes with it.
func open(ctx context.Context, cfg config, logger *slog.Logger) (*app, error) {
	raw, err := cfg.storeURL()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, raw)
	if err != nil {
		return nil, err
	}
	closeStore := func() { store.Close(st) }
	if err := store.Migrate(ctx, st); err != nil {
		closeStore()
		return nil, err
	}
	led, err := ledgerFor(ctx, st, cfg.PaymentsTable, cfg.Mode == modeLease)
	if err != nil {
		closeStore()
		return nil, err
	}
	wrapped, err := wrapStore(cfg.Wrap, st)
	if err != nil {
		closeStore()
		return nil, err
	}
	st = wrapped // closeStore now closes the wrapper, which closes st
	describe := raw
	if u, err := url.Parse(raw); err == nil {
		describe = u.Redacted()
	}
	return newApp(st, led, cfg, logger, describe, closeStore)
}

// ledgerFor returns where the demo keeps its payments: a table in the
// store's own database when it has one, so the payment, the key and the
// stored response commit in one transaction; in the process otherwise. This
// is the demo's bookkeeping, not idemkit's: the store itself was opened,
// migrated and will be closed without knowing its backend. With direct (lease
// mode) the SQL ledgers write outside any transaction.
func ledgerFor(ctx context.Context, st store.Store, table string, direct bool) (ledger, error) {
	l, err := sqlLedgerFor(ctx, st, table)
	if err != nil {
		return nil, err
	}
	switch l := l.(type) {
	case *sqliteLedger:
		l.direct = direct
	case *postgresLedger:
		l.direct = direct
	case *mysqlLedger:
		l.direct = direct
	}
	return l, err
}

func sqlLedgerFor(ctx context.Context, st store.Store, table string) (ledger, error) {
	if l, ok, err := mysqlLedgerFor(ctx, st, table); ok {
		return l, err
	}
	switch s := st.(type) {
	case *sqlite.Store:
		return newSQLiteLedger(ctx, s.DB(), table)
	case *postgres.Store:
		if pool, ok := s.DB().(*pgxpool.Pool); ok {
			return newPostgresLedger(ctx, pool, table)
		}
	}
	return &memLedger{}, nil
}
