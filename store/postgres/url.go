package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
)

// Schemes this package registers with store.Register when it is imported.
// store.Open makes a *pgxpool.Pool from the URL, pings the server within
// its context, and returns a Store on that pool:
//
//	postgres://user:password@host:5432/db?sslmode=disable&table=idempotency_keys
//
// The parameters table (WithTable), schema (WithSchema), purge_batch
// (WithPurgeBatch) and coalesce (WithCoalescing, true or false) configure
// the Store. pgx's own parameters go to pgx: the connection's (sslmode,
// sslrootcert, connect_timeout, target_session_attrs, ... as libpq names
// them), the pool's (pool_max_conns, pool_max_conn_lifetime, ...), pgx's
// (statement_cache_capacity, default_query_exec_mode, ...) and the
// common server settings application_name, search_path, timezone,
// client_encoding, datestyle, options, statement_timeout, lock_timeout and
// idle_in_transaction_session_timeout. Any other server setting is passed
// on purpose as var.NAME=value (?var.work_mem=64MB sends work_mem). Every
// other parameter is an error matching store.ErrInvalid before anything
// connects: ?tabel=x is a typo, not a setting for the server to refuse.
// The Store owns the pool: Close closes it.
// Open does not create the table: call store.Migrate or Store.Migrate.
const (
	Scheme      = "postgres"
	SchemeAlias = "postgresql"
)

func init() {
	store.Register(Scheme, openURL)
	store.Register(SchemeAlias, openURL)
}

// pgxParams are the query parameters pgx and pgxpool read themselves, and
// the server settings most URLs carry; store.URLParams.Driver passes them.
var pgxParams = []string{
	// pgconn's connection parameters
	"host", "port", "database", "dbname", "user", "password", "passfile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslpassword", "sslsni",
	"krbspn", "krbsrvname", "target_session_attrs", "service", "servicefile",
	"min_protocol_version", "max_protocol_version", "channel_binding", "require_auth",
	// pgx's
	"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	// pgxpool's
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period", "pool_max_conn_lifetime_jitter", "pool_ping_timeout",
	// server settings sent at startup
	"application_name", "search_path", "timezone", "client_encoding", "datestyle", "options",
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
}

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("table") {
		opts = append(opts, WithTable(p.String("table", "")))
	}
	if p.Has("schema") {
		opts = append(opts, WithSchema(p.String("schema", "")))
	}
	if p.Has("purge_batch") {
		opts = append(opts, WithPurgeBatch(p.Int("purge_batch", 0)))
	}
	if p.Has("coalesce") {
		opts = append(opts, WithCoalescing(p.Bool("coalesce", false)))
	}
	rest := p.Driver(pgxParams...)
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	pu := *u
	pu.RawQuery = rest.Encode()
	cfg, err := pgxpool.ParseConfig(pu.String())
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %w", store.ErrInvalid, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err) // match ctx.Err() whatever pgx reported
		}
		return nil, fmt.Errorf("postgres: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	s, err := New(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.closePool = pool.Close
	return s, nil
}
