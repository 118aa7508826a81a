package nats

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/idemkit/idemkit/store"
)

// Scheme is the URL scheme this package registers with store.Register when
// it is imported. store.Open connects to the servers the URL names (within
// its context) and returns a Store on the bucket its path names:
//
//	nats://[user:password@]host:4222[,host2:4222...]/BUCKET[?replicas=3&max_value_size=8388608]
//
// replicas (WithReplicas) and max_value_size (WithMaxValueSize) shape the
// bucket store.Migrate creates; storage=memory is WithMemoryStorage;
// connect_timeout (default 5s) bounds each connection attempt. Any other
// parameter is an error. The Store owns the connection: Close closes it.
const Scheme = "nats"

func init() {
	store.Register(Scheme, openURL)
}

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	bucket := strings.Trim(u.Path, "/")
	if bucket == "" {
		return nil, fmt.Errorf("%w: no bucket: write nats://host:4222/BUCKET", store.ErrInvalid)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: no server: write nats://host:4222/BUCKET", store.ErrInvalid)
	}
	p := store.NewURLParams(u)
	var opts []Option
	if p.Has("replicas") {
		opts = append(opts, WithReplicas(p.Int("replicas", DefaultReplicas)))
	}
	if p.Has("max_value_size") {
		opts = append(opts, WithMaxValueSize(p.Int("max_value_size", 0)))
	}
	if p.Has("storage") {
		switch v := p.String("storage", ""); v {
		case "file":
		case "memory":
			opts = append(opts, WithMemoryStorage())
		default:
			p.Fail("storage", v, fmt.Errorf("not file or memory"))
		}
	}
	timeout := p.Duration("connect_timeout", 5*time.Second)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: connect_timeout %v is not positive", store.ErrInvalid, timeout)
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		servers = append(servers, "nats://"+h)
	}
	nopts := []natsgo.Option{natsgo.Timeout(timeout), natsgo.MaxReconnects(-1)}
	if u.User != nil {
		pass, _ := u.User.Password()
		nopts = append(nopts, natsgo.UserInfo(u.User.Username(), pass))
	}
	// Check the options before connecting, so bad input dials nothing.
	if !bucketRe.MatchString(bucket) {
		return nil, fmt.Errorf("%w: bucket name %q: use letters, digits, _ and - only", store.ErrInvalid, bucket)
	}
	if _, err := newOptions(opts); err != nil {
		return nil, err
	}
	nc, err := connect(ctx, strings.Join(servers, ","), nopts)
	if err != nil {
		return nil, err
	}
	s, err := New(nc, bucket, opts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// connect dials within ctx: nats.Connect has no context, so it runs aside
// and a cancelled ctx abandons it (closing the connection if it comes).
func connect(ctx context.Context, servers string, opts []natsgo.Option) (*natsgo.Conn, error) {
	type result struct {
		nc  *natsgo.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		nc, err := natsgo.Connect(servers, opts...)
		ch <- result{nc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("connecting: %w", r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("connecting: %w", ctx.Err())
	}
}
