package spanner

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	sp "cloud.google.com/go/spanner"

	"github.com/idemkit/idemkit/store"
)

func init() { store.Register("spanner", open) }

// databasePath is the database a spanner:// URL names.
var databasePath = regexp.MustCompile(`^projects/[^/]+/instances/[^/]+/databases/[^/]+$`)

// open is the store.Opener of spanner://projects/P/instances/I/databases/D
// URLs, with the query parameters table= and purge_batch=. It connects
// with the default credentials (or to SPANNER_EMULATOR_HOST when that is
// set) and checks within ctx that the database answers.
func open(ctx context.Context, u *url.URL) (store.Store, error) {
	db := u.Host + u.Path
	if u.User != nil || u.Port() != "" || !databasePath.MatchString(db) {
		return nil, fmt.Errorf("spanner: %w: URL must be spanner://projects/P/instances/I/databases/D", store.ErrInvalid)
	}
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("table") {
		opts = append(opts, WithTable(p.String("table", DefaultTable)))
	}
	if p.Has("purge_batch") {
		opts = append(opts, WithPurgeBatch(p.Int("purge_batch", DefaultPurgeBatch)))
	}
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("spanner: %w", err)
	}
	var c config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("spanner: %w", err)
		}
	}
	client, err := sp.NewClient(ctx, db)
	if err != nil {
		return nil, wrap(ctx, "connect", err)
	}
	s, err := New(client, opts...)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owns = true
	ro := client.Single()
	defer ro.Close()
	if err := ro.Query(ctx, sp.Statement{SQL: "SELECT 1"}).Do(func(*sp.Row) error { return nil }); err != nil {
		client.Close()
		return nil, wrap(ctx, "connect", err)
	}
	return s, nil
}
