package dynamodb_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamodb"
)

// proxied returns a Store on a table of its own whose requests reach the
// local server through a fault proxy.
func proxied(t *testing.T) (*dynamodb.Store, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(testenv.DynamoDBEndpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := awsdynamodb.New(awsdynamodb.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String("http://" + p.Addr()),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	return newTable(t, c), p
}

// TestLostReplies: the server applies a write but its reply is lost (the
// connection is cut after the request went through). The SDK sends the
// request again within the same call, and each of the Store's writes,
// repeated, gives the answer the first would have: the repeated Claim
// finds its own claim and renews it, the repeated Complete finds the key
// completed by its token, the repeated Release finds nothing to delete.
func TestLostReplies(t *testing.T) {
	s, p := proxied(t)
	ctx := t.Context()
	tok := store.NewToken()

	p.LoseReplyTo([]byte("lost-claim"))
	mustClaim(t, s, "lost-claim", "fp", tok, store.Acquired)
	mustClaim(t, s, "lost-claim", "fp", store.NewToken(), store.InProgress)

	p.LoseReplyTo([]byte("lost-claim"))
	if err := s.Complete(ctx, "lost-claim", tok, []byte("done"), time.Hour); err != nil {
		t.Fatalf("Complete whose first reply was lost: %v", err)
	}
	cl := mustClaim(t, s, "lost-claim", "fp", store.NewToken(), store.Completed)
	if string(cl.Record.Response) != "done" {
		t.Fatalf("replayed %q, want done", cl.Record.Response)
	}

	rel := store.NewToken()
	mustClaim(t, s, "lost-release", "fp", rel, store.Acquired)
	p.LoseReplyTo([]byte("lost-release"))
	if err := s.Release(ctx, "lost-release", rel); err != nil {
		t.Fatalf("Release whose first reply was lost: %v", err)
	}
	if _, err := s.Get(ctx, "lost-release"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after the Release = %v, want ErrNotFound", err)
	}
}

// TestBlackholedServer: with a server that takes requests and never
// answers, a call returns promptly when its context ends, with an error
// that matches the context's and none of the sentinels.
func TestBlackholedServer(t *testing.T) {
	s, p := proxied(t)
	p.SetBlackhole(true)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Claim on a black-holed server = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Claim took %v to return after its 200ms context", d)
	}
}
