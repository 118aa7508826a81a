package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/store"
)

// DefaultClockSkew is the clock disagreement between the processes sharing a
// table that a Store allows for unless WithClockSkew says otherwise.
const DefaultClockSkew = time.Second

// MaxResponseLen is the longest response, in bytes, that Complete stores.
// DynamoDB refuses items over 400 KB (409,600 bytes, attribute names
// included); this leaves 4 KiB of the item for the key, fingerprint,
// token and the other attributes (together at most 2,300 bytes). A longer
// response is rejected with store.ErrInvalid before anything is written.
const MaxResponseLen = 400*1024 - 4*1024

// maxAttempts bounds how often Claim decides again after the item changed
// between its conditional write and the read that explains a refusal.
const maxAttempts = 16

var (
	_ store.Store    = (*Store)(nil)
	_ store.Purger   = (*Store)(nil)
	_ store.Migrator = (*Store)(nil)

	tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
)

// Client is the part of *dynamodb.Client a Store calls. A *dynamodb.Client
// made with dynamodb.NewFromConfig implements it; tests and wrappers (a
// client that counts calls, or fails some) may implement it too.
type Client interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Store is a store.Store kept in one DynamoDB table, one item per key. It is
// safe for concurrent use. A client passed to New stays the caller's.
type Store struct {
	client     Client
	table      *string
	now        func() time.Time
	skew       time.Duration
	purgeBatch int32
	throttle   backoff
}

// Option configures a Store.
type Option func(*options)

type options struct {
	now        func() time.Time
	skew       time.Duration
	purgeBatch int
	throttle   backoff
	errs       []error
}

// WithClock sets the clock the Store reads deadlines from; default
// time.Now. DynamoDB has no clock of its own in condition expressions: the
// time a Store sends in its conditions is this clock's (see the package
// documentation). Tests pass a manual clock. A nil clock is an error at New.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		o.now = now
		if now == nil {
			o.errs = append(o.errs, errors.New("WithClock: nil clock; pass time.Now or a test clock"))
		}
	}
}

// WithClockSkew sets how far the clocks of the processes sharing the table
// may disagree (default DefaultClockSkew). Every deadline a Store writes
// (the end of a lease or of a retention) lies d past what was asked, and a
// record is over for every Store from the instant its clock reads that
// deadline; so a process whose clock runs up to d ahead of the holder's
// never takes over a lease the holder still counts as live. The records
// report these deadlines (LockedUntil, ExpiresAt), d included. Zero trusts
// every clock exactly; a negative d is an error at New.
func WithClockSkew(d time.Duration) Option {
	return func(o *options) {
		o.skew = d
		if d < 0 {
			o.errs = append(o.errs, fmt.Errorf("WithClockSkew(%v): negative; pass 0 or more", d))
		}
	}
}

// WithPurgeBatch sets how many items one Scan page of Purge reads (default
// 1000, at most 10000). A value outside 1..10000 is an error at New.
func WithPurgeBatch(n int) Option {
	return func(o *options) {
		o.purgeBatch = n
		if n < 1 || n > 10000 {
			o.errs = append(o.errs, fmt.Errorf("WithPurgeBatch(%d): outside 1..10000", n))
		}
	}
}

// WithThrottleRetry sets how long one Store call keeps retrying requests
// that DynamoDB throttled (ProvisionedThroughputExceededException,
// ThrottlingException, RequestLimitExceeded), after the SDK's own retries,
// with exponential backoff from 20ms up to 1s between attempts (default
// 10s). A throttled call that runs out of this time returns the throttling
// error, never store.ErrLeaseLost. A non-positive d is an error at New.
func WithThrottleRetry(d time.Duration) Option {
	return func(o *options) {
		o.throttle.total = d
		if d <= 0 {
			o.errs = append(o.errs, fmt.Errorf("WithThrottleRetry(%v): not positive", d))
		}
	}
}

// New returns a Store on table through client (usually a *dynamodb.Client
// from dynamodb.NewFromConfig). New does no I/O: call Migrate to create the
// table, or create it yourself with the key schema the package documentation
// gives. A nil client, a table name DynamoDB would refuse, or an invalid
// option is an error that matches store.ErrInvalid.
func New(client Client, table string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, skew: DefaultClockSkew, purgeBatch: 1000, throttle: defaultBackoff}
	for _, opt := range opts {
		if opt == nil {
			o.errs = append(o.errs, errors.New("nil Option"))
			continue
		}
		opt(&o)
	}
	if client == nil {
		o.errs = append(o.errs, errors.New("nil client; pass a *dynamodb.Client"))
	}
	if !tableName.MatchString(table) {
		o.errs = append(o.errs, fmt.Errorf("table name %q: want 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'", table))
	}
	if err := errors.Join(o.errs...); err != nil {
		return nil, fmt.Errorf("dynamodb: new: %w: %w", store.ErrInvalid, err)
	}
	return &Store{client: client, table: &table, now: o.now, skew: o.skew,
		purgeBatch: int32(o.purgeBatch), throttle: o.throttle}, nil
}

// Table returns the name of the Store's table.
func (s *Store) Table() string { return *s.table }

// Close does nothing and returns nil: an SDK client holds no resource that
// needs closing. It is there so that store.Close works on every backend.
func (s *Store) Close() error { return nil }
