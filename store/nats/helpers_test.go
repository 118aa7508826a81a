package nats_test

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
)

// natsURL returns IDEMKIT_NATS_URL (nats://host:port of a server with
// JetStream), or skips, or fails under CI=true, when it is unset.
func natsURL(t testing.TB) string {
	t.Helper()
	v := os.Getenv("IDEMKIT_NATS_URL")
	switch {
	case v != "":
		return v
	case os.Getenv("CI") == "true":
		t.Fatal("IDEMKIT_NATS_URL is not set: CI=true requires a real NATS server with JetStream (bash .ci/run starts one)")
	default:
		t.Skip("IDEMKIT_NATS_URL is not set; skipping the tests that need a NATS server with JetStream")
	}
	return ""
}

// connect opens a connection to url, closed when t ends.
func connect(t testing.TB, url string) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(url, natsgo.Timeout(5*time.Second), natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testBucket returns a bucket name of the test's own; it is deleted when t
// ends (only it: tests never delete a bucket they did not make).
func testBucket(t testing.TB, nc *natsgo.Conn) string {
	t.Helper()
	name := "idemkit_test_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		js, err := jetstream.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteKeyValue(ctx, name); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Logf("deleting bucket %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a Store on a fresh bucket of its own, made by Migrate.
func newStore(t testing.TB, nc *natsgo.Conn, opts ...idemnats.Option) *idemnats.Store {
	t.Helper()
	s, err := idemnats.New(nc, testBucket(t, nc), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.Migrate(ctx, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// tryConnect returns a connection to url that does not reconnect, or nil.
func tryConnect(url string) *natsgo.Conn {
	nc, err := natsgo.Connect(url, natsgo.Timeout(time.Second), natsgo.NoReconnect())
	if err != nil {
		return nil
	}
	return nc
}
