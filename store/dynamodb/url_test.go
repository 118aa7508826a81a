package dynamodb_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/seedtest"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamodb"
)

// openLocal opens a Store from a dynamodb:// URL on a table of its own on
// the local server, created with store.Migrate and deleted when t ends.
func openLocal(t *testing.T, params string) store.Store {
	t.Helper()
	name := tableName(t)
	u := "dynamodb://" + name + "?region=" + testRegion + "&endpoint=" + url.QueryEscape(testenv.DynamoDBEndpoint(t))
	if params != "" {
		u += "&" + params
	}
	s, err := store.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(s) })
	if err := store.Migrate(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	dropTable(t, name)
	return s
}

func TestOpen(t *testing.T) {
	s := openLocal(t, "clock_skew=250ms&purge_batch=10&throttle_retry=30s")
	if _, ok := s.(*dynamodb.Store); !ok {
		t.Fatalf("store.Open returned a %T", s)
	}
	mustClaim(t, s, "k", "fp", store.NewToken(), store.Acquired)
}

func TestOpenRejects(t *testing.T) {
	ep := url.QueryEscape(testenv.DynamoDBEndpoint(t))
	for name, u := range map[string]string{
		"unknown parameter": "dynamodb://keys?region=us-east-1&endpoint=" + ep + "&tabel=x",
		"bad endpoint":      "dynamodb://keys?region=us-east-1&endpoint=127.0.0.1:8000",
		"bad skew":          "dynamodb://keys?region=us-east-1&endpoint=" + ep + "&clock_skew=-1s",
		"malformed skew":    "dynamodb://keys?region=us-east-1&endpoint=" + ep + "&clock_skew=soon",
		"bad batch":         "dynamodb://keys?region=us-east-1&endpoint=" + ep + "&purge_batch=0",
		"short table":       "dynamodb://ab?region=us-east-1&endpoint=" + ep,
		"no table":          "dynamodb://?region=us-east-1&endpoint=" + ep,
		"a path":            "dynamodb://keys/more?region=us-east-1&endpoint=" + ep,
		"a port":            "dynamodb://keys:99?region=us-east-1&endpoint=" + ep,
		"a user":            "dynamodb://me@keys?region=us-east-1&endpoint=" + ep,
		"region twice":      "dynamodb://keys?region=us-east-1&region=eu-west-1&endpoint=" + ep,
	} {
		t.Run(name, func(t *testing.T) {
			s, err := store.Open(t.Context(), u)
			if !errors.Is(err, store.ErrInvalid) {
				store.Close(s)
				t.Fatalf("Open(%s) = %v, want store.ErrInvalid", u, err)
			}
			t.Log(err)
		})
	}
}

// TestOpenNoRegion: without region= and without one in the AWS
// configuration, Open says what to add.
func TestOpenNoRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	_, err := store.Open(t.Context(), "dynamodb://keys?endpoint=http://127.0.0.1:1")
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open without a region = %v, want store.ErrInvalid", err)
	}
}

// TestOpenUnreachable: a server that does not answer fails Open within
// its context, with an error that matches none of the sentinels.
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "dynamodb://keys?region=us-east-1&endpoint=http://127.0.0.1:1&throttle_retry=1s")
	if err == nil || errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open of an unreachable endpoint = %v, want a connection error", err)
	}
}

// TestSeeds runs the seeds' exercise on a Store chosen only by its URL.
func TestSeeds(t *testing.T) {
	seedtest.Run(t, openLocal(t, ""))
}

// TestOpenOtherKeySchema: a table whose partition key is not the Store's
// fails Open, before any call relies on it.
func TestOpenOtherKeySchema(t *testing.T) {
	c := localClient(t)
	name := tableName(t)
	_, err := c.CreateTable(t.Context(), &awsdynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	dropTable(t, name)
	s, err := store.Open(t.Context(), "dynamodb://"+name+"?region="+testRegion+"&endpoint="+url.QueryEscape(testenv.DynamoDBEndpoint(t)))
	if err == nil {
		store.Close(s)
		t.Fatal("Open of a table keyed by another attribute succeeded")
	}
	t.Log(err)
}
