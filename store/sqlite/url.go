package sqlite

import (
	"context"
	"fmt"
	"net/url"

	"github.com/idemkit/idemkit/store"
)

// Scheme is the URL scheme this package registers with store.Register when
// it is imported. store.Open calls Open with the path and options of the URL:
//
//	sqlite:///var/lib/app/keys.db   an absolute path
//	sqlite://data/keys.db           a path relative to the working directory (also sqlite:data/keys.db)
//	sqlite://:memory:               a private in-memory database (also sqlite::memory:)
//
// Query parameters, each an Option of the same meaning:
//
//	table=name          WithTable (default DefaultTable)
//	busy_timeout=5s     WithBusyTimeout
//	purge_batch=1000    WithPurgeBatch
//	max_conns=8         WithMaxConns
//	pragma=x(1)         WithPragma, repeatable: ?pragma=synchronous(FULL)&pragma=foreign_keys(1)
//
// Any other parameter is an error. The Store owns the database: Close closes
// it. Open does not create the table: call store.Migrate or Store.Migrate.
const Scheme = "sqlite"

func init() { store.Register(Scheme, openURL) }

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	path := u.Opaque
	if path == "" {
		path = u.Host + u.Path
	}
	if u.User != nil {
		return nil, fmt.Errorf("sqlite: %w: a sqlite URL has no user or password", store.ErrInvalid)
	}
	if path == "" {
		return nil, fmt.Errorf("sqlite: %w: the URL names no file: use sqlite:///abs/path.db, sqlite://rel/path.db, or sqlite://:memory: for a private database in memory", store.ErrInvalid)
	}
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("table") {
		opts = append(opts, WithTable(p.String("table", "")))
	}
	if p.Has("busy_timeout") {
		opts = append(opts, WithBusyTimeout(p.Duration("busy_timeout", 0)))
	}
	if p.Has("purge_batch") {
		opts = append(opts, WithPurgeBatch(p.Int("purge_batch", 0)))
	}
	if p.Has("max_conns") {
		opts = append(opts, WithMaxConns(p.Int("max_conns", 0)))
	}
	for _, pr := range p.All("pragma") {
		opts = append(opts, WithPragma(pr))
	}
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s, err := open(ctx, path, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}
