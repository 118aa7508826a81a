package dynamodb_test

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store/dynamodb"
)

// wrapped is a dynamodb.Client that passes every call to the real one,
// after letting a test fail it (throttle) and count it, and that can play
// DynamoDB's ReturnValuesOnConditionCheckFailure where the local server
// does not (withOld).
type wrapped struct {
	dynamodb.Client

	mu       sync.Mutex
	calls    map[string]int
	throttle map[string]int // calls of each operation still to refuse with a throttling error
	withOld  bool           // fill ConditionalCheckFailedException.Item as DynamoDB does
}

func wrap(c dynamodb.Client) *wrapped {
	return &wrapped{Client: c, calls: map[string]int{}, throttle: map[string]int{}}
}

func (w *wrapped) count(op string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[op]
}

func (w *wrapped) setThrottle(op string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.throttle[op] = n
}

// before counts op and says whether to refuse it as throttled.
func (w *wrapped) before(op string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[op]++
	if w.throttle[op] != 0 {
		w.throttle[op]--
		return &types.ProvisionedThroughputExceededException{Message: aws.String("injected by the test")}
	}
	return nil
}

// old fills in the item a refused condition ran into, read with the same
// consistency DynamoDB's own ALL_OLD gives (the item as the condition saw
// it: here a moment later, which the store must also cope with).
func (w *wrapped) old(ctx context.Context, table *string, key map[string]types.AttributeValue, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if !w.withOld || !errors.As(err, &ccf) {
		return err
	}
	out, gerr := w.Client.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if gerr != nil {
		return gerr
	}
	ccf.Item = out.Item
	return err
}

func (w *wrapped) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	if err := w.before("PutItem"); err != nil {
		return nil, err
	}
	out, err := w.Client.PutItem(ctx, in, opts...)
	return out, w.old(ctx, in.TableName, map[string]types.AttributeValue{"k": in.Item["k"]}, err)
}

func (w *wrapped) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	if err := w.before("UpdateItem"); err != nil {
		return nil, err
	}
	out, err := w.Client.UpdateItem(ctx, in, opts...)
	return out, w.old(ctx, in.TableName, in.Key, err)
}

func (w *wrapped) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	if err := w.before("GetItem"); err != nil {
		return nil, err
	}
	return w.Client.GetItem(ctx, in, opts...)
}

func (w *wrapped) DeleteItem(ctx context.Context, in *awsdynamodb.DeleteItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.DeleteItemOutput, error) {
	if err := w.before("DeleteItem"); err != nil {
		return nil, err
	}
	return w.Client.DeleteItem(ctx, in, opts...)
}
