package dynamodb

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/smithy-go"
)

// backoff says how a Store call retries throttled requests.
type backoff struct {
	first, max time.Duration // the first pause, and the longest
	total      time.Duration // how long one call keeps trying
}

var defaultBackoff = backoff{first: 20 * time.Millisecond, max: time.Second, total: 10 * time.Second}

// throttled reports whether err is DynamoDB refusing a request for its rate,
// which leaves the item as it was: the request may be sent again.
func throttled(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}

// retry calls do until it returns something other than a throttling error,
// pausing with exponential backoff and full jitter in between, for at most
// the backoff's total time. It returns promptly with ctx's error when ctx
// ends during a pause.
func (s *Store) retry(ctx context.Context, do func(context.Context) error) error {
	err := do(ctx)
	if err == nil || !throttled(err) {
		return err
	}
	deadline := time.Now().Add(s.throttle.total)
	pause := s.throttle.first
	for {
		wait := time.Duration(rand.Int64N(int64(pause))) + pause/2
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		if err = do(ctx); err == nil || !throttled(err) {
			return err
		}
		pause = min(2*pause, s.throttle.max)
	}
}
