package dynamodb

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/store"
)

// Scheme is the URL scheme this package registers with store.Register when
// it is imported:
//
//	dynamodb://TABLE?region=eu-west-1
//	dynamodb://TABLE?region=us-east-1&endpoint=http://127.0.0.1:8000
//
// The host is the table's name. store.Open loads the AWS configuration the
// SDK's usual way (environment, shared config and credentials files, IAM
// role) with config.LoadDefaultConfig; the parameters region (required
// unless that configuration has one) and endpoint (a DynamoDB-compatible
// server, such as dynalite or DynamoDB Local) override it, and clock_skew
// (WithClockSkew, e.g. 500ms), purge_batch (WithPurgeBatch) and
// throttle_retry (WithThrottleRetry, e.g. 30s) configure the Store. Open
// makes one strongly consistent GetItem within its context (a permission
// the Store needs anyway, see Store.CheckClock), so a server that cannot be
// reached, credentials that are refused, a table with another key schema,
// or a clock provably off DynamoDB's by more than the skew allowance fail
// there; a table that does not exist yet is fine (store.Migrate creates
// it).
const Scheme = "dynamodb"

func init() {
	store.Register(Scheme, openURL)
}

func openURL(ctx context.Context, u *url.URL) (store.Store, error) {
	p := store.NewURLParams(u)
	region := p.String("region", "")
	endpoint := p.String("endpoint", "")
	var opts []Option
	if p.Has("clock_skew") {
		opts = append(opts, WithClockSkew(p.Duration("clock_skew", DefaultClockSkew)))
	}
	if p.Has("purge_batch") {
		opts = append(opts, WithPurgeBatch(p.Int("purge_batch", 1000)))
	}
	if p.Has("throttle_retry") {
		opts = append(opts, WithThrottleRetry(p.Duration("throttle_retry", defaultBackoff.total)))
	}
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("dynamodb: %w", err)
	}
	if u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("dynamodb: %w: want dynamodb://TABLE?region=...: the host is the table name, without user, port or path", store.ErrInvalid)
	}
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, fmt.Errorf("dynamodb: %w: endpoint=%q: want an http:// or https:// URL such as http://127.0.0.1:8000", store.ErrInvalid, endpoint)
		}
	}
	var loadOpts []func(*config.LoadOptions) error
	if region != "" {
		loadOpts = append(loadOpts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("dynamodb: %w: no AWS region: add region=... to the URL or set AWS_REGION", store.ErrInvalid)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	s, err := New(client, u.Host, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := s.CheckClock(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
