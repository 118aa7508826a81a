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
// the Store; every other parameter goes to pgx
// (sslmode, pool_max_conns, connect_timeout, application_name, ...), which
// rejects the ones it cannot use. The Store owns the pool: Close closes it.
// Open does not create the table: call store.Migrate or Store.Migrate.
const (
	Scheme      = "postgres"
	SchemeAlias = "postgresql"
)

func init() {
	store.Register(Scheme, openURL)
	store.Register(SchemeAlias, openURL)
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
	rest := p.Rest()
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
