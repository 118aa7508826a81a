package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/store"
)

// Migrate implements store.Migrator: it creates the table when it does not
// exist, on-demand (PAY_PER_REQUEST) with the string partition key "k",
// waits until it is ACTIVE, and enables Time to Live on TTLAttribute. It is
// idempotent: a table that exists (made by another process, or by your own
// infrastructure code with the same key schema) is used as it is, and TTL
// already enabled is left alone. A server without the TTL API (dynalite)
// keeps the table without TTL; Purge then deletes what is over.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            s.table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: ptr(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: ptr(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamodb: migrate: create table %s: %w", *s.table, err)
	}
	if err := s.waitActive(ctx); err != nil {
		return fmt.Errorf("dynamodb: migrate: %w", err)
	}
	_, err = s.client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               s.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: ptr(attrTTL), Enabled: ptr(true)},
	})
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "UnknownOperationException": // no TTL on this server
			return nil
		case "ValidationException":
			if strings.Contains(ae.ErrorMessage(), "already enabled") {
				return nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("dynamodb: migrate: enable TTL on %s: %w", *s.table, err)
	}
	return nil
}

// waitActive polls DescribeTable until the table is ACTIVE.
func (s *Store) waitActive(ctx context.Context) error {
	pause := 20 * time.Millisecond
	for {
		out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", *s.table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for table %s to become active: %w", *s.table, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// Purge implements store.Purger for tables without TTL (or to clean up
// sooner than TTL does): it scans the table, a page of WithPurgeBatch items
// at a time with strongly consistent reads, and deletes each completed
// record whose retention ended and each lease that lapsed more than
// store.LapsedKept ago (by the same clock rule as Claim), with a DeleteItem
// conditional on it still being that record and still that far over, so a
// key claimed again meanwhile is never touched. A lapsed lease younger than
// LapsedKept stays, absent to Claim and Get, for the attempt count. A Scan
// reads every item of the table: on a large table prefer TTL, which costs
// no read capacity.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	now := s.now()
	values := map[string]types.AttributeValue{
		":now": attrTime(now), ":lapsed": attrTime(now.Add(-store.LapsedKept)),
		":done": completedValue, ":inprog": inProgressValue,
	}
	filter := "(#s = :done AND #e <= :now) OR (#s = :inprog AND #e <= :lapsed)"
	proj := "#k, #t"
	in := &dynamodb.ScanInput{
		TableName: s.table, ConsistentRead: &consistent, Limit: &s.purgeBatch,
		FilterExpression: &filter, ProjectionExpression: &proj,
		ExpressionAttributeNames:  namesFor("#e", "#k", "#t", "#s"),
		ExpressionAttributeValues: values,
	}
	cond := "#t = :tok AND (" + filter + ")"
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("dynamodb: purge: %w", err)
		}
		var out *dynamodb.ScanOutput
		err := s.retry(ctx, func(ctx context.Context) error {
			var err error
			out, err = s.client.Scan(ctx, in)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("dynamodb: purge: scan: %w", err)
		}
		for _, item := range out.Items {
			tok, ok := item[attrToken]
			if !ok {
				continue
			}
			del := &dynamodb.DeleteItemInput{
				TableName: s.table, Key: map[string]types.AttributeValue{attrKey: item[attrKey]},
				ConditionExpression:      &cond,
				ExpressionAttributeNames: namesFor("#t", "#e", "#s"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":tok": tok, ":now": values[":now"],
					":lapsed": values[":lapsed"], ":done": completedValue, ":inprog": inProgressValue},
			}
			err := s.retry(ctx, func(ctx context.Context) error {
				_, err := s.client.DeleteItem(ctx, del)
				return err
			})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				n++
			case errors.As(err, &ccf): // claimed again or renewed meanwhile: not ours to delete
			default:
				return n, fmt.Errorf("dynamodb: purge: delete: %w", err)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func ptr[T any](v T) *T { return &v }
