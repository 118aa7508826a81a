package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// clockProbe is the key CheckClock reads: any key does; this one is
// unlikely to be a caller's.
const clockProbe = "\x01idemkit-clock-check"

// ErrClockSkew: CheckClock found the Store's clock off DynamoDB's by more
// than the skew allowance.
var ErrClockSkew = errors.New("dynamodb: clock off DynamoDB's by more than the skew allowance")

// CheckClock compares the Store's clock (WithClock) with DynamoDB's, as the
// Date header of one GetItem's response gives it (to the second), and
// returns the offset (the Store's clock minus DynamoDB's, the middle of the
// interval the measurement allows). It returns an error matching
// ErrClockSkew only when the clock is provably off by more than the skew
// allowance (WithClockSkew): when every offset that the request's round
// trip and the header's one-second resolution allow is beyond it. A
// response without a Date header (some compatible servers) is an error
// matching neither. store.Open calls it, so a process whose clock is far
// off fails at start instead of taking over leases early; call it yourself
// (at start, in a health check) on a Store made with New.
func (s *Store) CheckClock(ctx context.Context) (time.Duration, error) {
	in := &dynamodb.GetItemInput{TableName: s.table, Key: keyOf(clockProbe), ConsistentRead: &consistent}
	var (
		out           *dynamodb.GetItemOutput
		before, after time.Time
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		before = s.now()
		out, err = s.client.GetItem(ctx, in)
		after = s.now()
		return err
	})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return 0, fmt.Errorf("dynamodb: check clock: read from table %s: %w", *s.table, err)
	}
	date, ok := responseDate(out, err)
	if !ok {
		return 0, errors.New("dynamodb: check clock: the response has no Date header")
	}
	// The server wrote the header at some instant between before and
	// after on our clock, when its own clock read [date, date+1s).
	lo, hi := before.Sub(date.Add(time.Second)), after.Sub(date)
	offset := lo + (hi-lo)/2
	if lo > s.skew || hi < -s.skew {
		return offset, fmt.Errorf("%w: it reads %v ahead of DynamoDB's (between %v and %v), allowance %v; synchronize the clock (NTP) or raise WithClockSkew",
			ErrClockSkew, offset.Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond), s.skew)
	}
	return offset, nil
}

// responseDate returns the Date header of the HTTP response that out or
// err came with.
func responseDate(out *dynamodb.GetItemOutput, err error) (time.Time, bool) {
	var raw any
	if out != nil {
		raw = awsmiddleware.GetRawResponse(out.ResultMetadata)
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		raw = re.Response
	}
	resp, ok := raw.(*smithyhttp.Response)
	if !ok || resp == nil || resp.Response == nil {
		return time.Time{}, false
	}
	d, perr := http.ParseTime(resp.Header.Get("Date"))
	return d, perr == nil
}
