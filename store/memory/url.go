package memory

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Scheme is the URL scheme this package registers with store.Register when
// it is imported: store.Open(ctx, "memory://") returns a new, empty Store.
//
// The one query parameter is sweep, the interval of the background sweep
// (WithSweepInterval, a duration such as "30s"; "0" starts none):
// "memory://?sweep=10s". Every Open returns a Store of its own; nothing is
// shared between two of them.
const Scheme = "memory"

func init() { store.Register(Scheme, openURL) }

func openURL(_ context.Context, u *url.URL) (store.Store, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.User != nil {
		return nil, fmt.Errorf("memory: %w: the URL has no host or path, only ?sweep=: got %q", store.ErrInvalid, u.Redacted())
	}
	p := store.NewURLParams(u)
	sweep := p.Duration("sweep", time.Minute)
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	s, err := New(WithSweepInterval(sweep))
	if err != nil {
		return nil, err
	}
	return s, nil
}
