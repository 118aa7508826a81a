package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/pairbench"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkPaired runs the Store against the very same SDK calls written by
// hand (the same conditional PutItem with a ready-made item, the same
// conditional UpdateItem, and for a replay the same refused PutItem and
// consistent GetItem the Store makes where the server returns no item), on
// the same client, table and server, in alternating phases
// (internal/pairbench), and reports each side's throughput and their ratio.
// One op is a Claim+Complete of a new key, or one replay (a Claim that finds
// the key completed):
//
//	go test -run '^$' -bench Paired -benchtime 2000x -count 5 ./store/dynamodb/
//
// Against dynalite the numbers say what the Store adds on the client; they
// say nothing of DynamoDB's own latency.
func BenchmarkPaired(b *testing.B) {
	c := localClient(b)
	s := newTable(b, c)
	table := aws.String(s.Table())
	for _, bc := range []struct {
		name string
		ops  func(b *testing.B, run string) (storeOp, rawOp func(int) error)
	}{
		{"ClaimComplete", func(b *testing.B, run string) (func(int) error, func(int) error) {
			return func(i int) error { return storeCycle(s, run+"s"+strconv.Itoa(i)) },
				func(i int) error { return rawCycle(c, table, run+"r"+strconv.Itoa(i)) }
		}},
		{"Replay", func(b *testing.B, run string) (func(int) error, func(int) error) {
			key := run + "done"
			if err := storeCycle(s, key); err != nil {
				b.Fatal(err)
			}
			return func(int) error {
					cl, err := s.Claim(context.Background(), key, "fp", store.NewToken(), benchLease)
					if err == nil && cl.Outcome != store.Completed {
						err = fmt.Errorf("replay: %v", cl.Outcome)
					}
					return err
				}, func(int) error {
					return rawReplay(c, table, key)
				}
		}},
	} {
		for _, w := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/workers=%d", bc.name, w), func(b *testing.B) {
				storeOp, rawOp := bc.ops(b, fmt.Sprintf("%s-%d-", bc.name, benchRun.Add(1)))
				st, raw := pairbench.Run(b, b.N, w, 64, storeOp, rawOp)
				if st.N == 0 || raw.N == 0 {
					return
				}
				storeRate := float64(st.N) / st.Elapsed.Seconds()
				rawRate := float64(raw.N) / raw.Elapsed.Seconds()
				b.ReportMetric(storeRate, "store-ops/s")
				b.ReportMetric(rawRate, "raw-ops/s")
				b.ReportMetric(storeRate/rawRate, "store/raw")
			})
		}
	}
}

// benchRun numbers the benchmark runs, so that every run's keys are new.
var benchRun atomic.Int64

const (
	benchLease     = time.Minute
	benchRetention = 5 * time.Minute
)

var benchResponse = []byte(`{"id":"pay_0123456789","status":"succeeded","amount":1999,"currency":"EUR","created":1764464523}`)

func storeCycle(s store.Store, key string) error {
	ctx := context.Background()
	tok := store.NewToken()
	cl, err := s.Claim(ctx, key, "fp", tok, benchLease)
	if err != nil {
		return err
	}
	if cl.Outcome != store.Acquired {
		return fmt.Errorf("claim %s: %v", key, cl.Outcome)
	}
	return s.Complete(ctx, key, tok, benchResponse, benchRetention)
}

var rawNames = map[string]string{"#k": "k", "#e": "e", "#s": "s", "#t": "t", "#f": "f"}

func nanos(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixNano(), 10)}
}

func rawClaimInput(table *string, key string, tok store.Token) *awsdynamodb.PutItemInput {
	now := time.Now()
	until := now.Add(benchLease + time.Second) // the default skew allowance
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	return &awsdynamodb.PutItemInput{
		TableName: table,
		Item: map[string]types.AttributeValue{
			"k": s(key), "f": s("fp"), "t": s(string(tok)), "s": &types.AttributeValueMemberN{Value: "1"},
			"l": nanos(until), "e": nanos(until),
			"ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(time.Hour).Unix()+1, 10)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#k) OR #e <= :now OR (#s = :inprog AND #t = :tok AND #f = :fp)"),
		ExpressionAttributeNames: rawNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": nanos(now), ":inprog": &types.AttributeValueMemberN{Value: "1"},
			":tok": s(string(tok)), ":fp": s("fp"),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func rawCycle(c *awsdynamodb.Client, table *string, key string) error {
	ctx := context.Background()
	tok := store.NewToken()
	if _, err := c.PutItem(ctx, rawClaimInput(table, key, tok)); err != nil {
		return err
	}
	expires := time.Now().Add(benchRetention + time.Second)
	_, err := c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: table, Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:         aws.String("SET #s = :done, #e = :e, #ttl = :ttl, #r = :r REMOVE #l"),
		ConditionExpression:      aws.String("#s = :inprog AND #t = :tok"),
		ExpressionAttributeNames: map[string]string{"#s": "s", "#e": "e", "#ttl": "ttl", "#r": "r", "#l": "l", "#t": "t"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done": &types.AttributeValueMemberN{Value: "2"}, ":inprog": &types.AttributeValueMemberN{Value: "1"},
			":tok": &types.AttributeValueMemberS{Value: string(tok)}, ":e": nanos(expires),
			":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires.Add(time.Hour).Unix()+1, 10)},
			":r":   &types.AttributeValueMemberB{Value: benchResponse},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

func rawReplay(c *awsdynamodb.Client, table *string, key string) error {
	ctx := context.Background()
	_, err := c.PutItem(ctx, rawClaimInput(table, key, store.NewToken()))
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("raw replay: the claim was not refused: %v", err)
	}
	if len(ccf.Item) > 0 {
		return nil
	}
	out, err := c.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: table,
		Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: key}}, ConsistentRead: aws.Bool(true)})
	if err == nil && len(out.Item) == 0 {
		err = fmt.Errorf("raw replay: no item")
	}
	return err
}
