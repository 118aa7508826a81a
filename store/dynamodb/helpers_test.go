package dynamodb_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/dynamodb"
)

// testRegion is the region the tests give the local server (any will do).
const testRegion = "us-east-1"

// localClient returns a client of the server IDEMKIT_DYNAMODB_ENDPOINT
// names, with static credentials (a local server accepts any), or skips
// (fails under CI) when the variable is unset.
func localClient(t testing.TB) *awsdynamodb.Client {
	t.Helper()
	endpoint := testenv.DynamoDBEndpoint(t)
	return awsdynamodb.New(awsdynamodb.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

var tableSeq atomic.Int64

// tableName returns a table name unique to this test run.
func tableName(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 150 {
		name = name[len(name)-150:]
	}
	return fmt.Sprintf("idemkit-%d-%d-%s", os.Getpid(), tableSeq.Add(1), strings.Trim(name, "-_."))
}

// newTable creates a table of its own for t, deleted when t ends, and
// returns a Store on it.
func newTable(t testing.TB, c dynamodb.Client, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	name := tableName(t)
	s, err := dynamodb.New(c, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dropTable(t, name)
	return s
}

// dropTable deletes the table name when t ends.
func dropTable(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := localClient(t).DeleteTable(ctx, &awsdynamodb.DeleteTableInput{TableName: &name}); err != nil {
			t.Errorf("deleting table %s: %v", name, err)
		}
	})
}
