package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// Schemes this package registers with store.Register when it is imported.
// store.Open makes a go-redis client from the URL, pings Redis within its
// context, and returns a Store on that client:
//
//	redis://[user:password@]host:6379[/db]        one server (rediss:// for TLS)
//	redis+cluster://host1:7001,host2:7002[/]      a Redis Cluster: the seed nodes, comma-separated
//	                                              (rediss+cluster:// for TLS)
//
// The parameters prefix (WithPrefix, default DefaultPrefix),
// eviction_check (WithEvictionCheck, true or false), persistence_check
// (WithPersistenceCheck, true or false), coalesce (WithCoalescing, true or
// false) and replicas with replicas_timeout
// (WithReplicas, e.g. replicas=1&replicas_timeout=200ms; the timeout
// defaults to 1s) configure the Store;
// every other parameter goes to go-redis's ParseURL or ParseClusterURL
// (dial_timeout, read_timeout, pool_size, protocol, ...), which rejects the
// ones it does not know. The client is made with ContextTimeoutEnabled, so
// a cancelled context ends a call promptly. The Store owns the client: Close
// closes it. Sentinel and Ring clients have no URL form: build them and pass
// them to New.
const (
	Scheme           = "redis"
	SchemeTLS        = "rediss"
	SchemeCluster    = "redis+cluster"
	SchemeClusterTLS = "rediss+cluster"
)

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeCluster, SchemeClusterTLS} {
		store.Register(s, openURL)
	}
}

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("prefix") {
		opts = append(opts, WithPrefix(p.String("prefix", "")))
	}
	if p.Has("eviction_check") {
		opts = append(opts, WithEvictionCheck(p.Bool("eviction_check", true)))
	}
	if p.Has("persistence_check") {
		opts = append(opts, WithPersistenceCheck(p.Bool("persistence_check", true)))
	}
	if p.Has("coalesce") {
		opts = append(opts, WithCoalescing(p.Bool("coalesce", false)))
	}
	if p.Has("replicas") || p.Has("replicas_timeout") {
		opts = append(opts, WithReplicas(p.Int("replicas", 0), p.Duration("replicas_timeout", time.Second)))
	}
	rest := p.Rest()
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	base, cluster := strings.CutSuffix(scheme, "+cluster")
	var client goredis.UniversalClient
	if cluster {
		hosts := strings.Split(u.Host, ",")
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("redis: %w: a cluster URL lists its seed nodes as host:port,host:port and has no database path", store.ErrInvalid)
		}
		for _, h := range hosts[1:] {
			rest.Add("addr", h)
		}
		cu := url.URL{Scheme: base, User: u.User, Host: hosts[0], RawQuery: rest.Encode()}
		o, err := goredis.ParseClusterURL(cu.String())
		if err != nil {
			return nil, fmt.Errorf("redis: %w: %s", store.ErrInvalid, strings.TrimPrefix(err.Error(), "redis: ")) // go-redis says "redis: " too
		}
		o.ContextTimeoutEnabled = true
		client = goredis.NewClusterClient(o)
	} else {
		su := *u
		su.Scheme = base
		su.RawQuery = rest.Encode()
		o, err := goredis.ParseURL(su.String())
		if err != nil {
			return nil, fmt.Errorf("redis: %w: %s", store.ErrInvalid, strings.TrimPrefix(err.Error(), "redis: ")) // go-redis says "redis: " too
		}
		o.ContextTimeoutEnabled = true
		client = goredis.NewClient(o)
	}
	s, err := New(client, opts...)
	if err != nil {
		client.Close()
		return nil, err
	}
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err) // match ctx.Err() whatever the client reported
		}
		return nil, fmt.Errorf("redis: connect to %s: %w", u.Host, err)
	}
	s.owned = true
	return s, nil
}
