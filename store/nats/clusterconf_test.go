package nats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
	"github.com/idemkit/idemkit/storetest"
)

// TestCluster starts a three-node cluster of nats-server 2.15 (or of
// IDEMKIT_NATS_SERVER_BIN) and runs,
// on R3 buckets: the conformance suite (per-key TTLs on), a check that the
// servers remove lapsed records by themselves, and the failover workload.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node NATS cluster")
	}
	c := startCluster(t, 3)
	nc := connect(t, c.URL())

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			New: func(t *testing.T) storetest.Subject {
				return storetest.Subject{Store: newStore(t, nc, idemnats.WithReplicas(3))}
			},
			Jitter: claimJitter,
		})
	})

	t.Run("BucketIsR3WithTTL", func(t *testing.T) {
		s := newStore(t, nc, idemnats.WithReplicas(3))
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		st, err := js.Stream(context.Background(), "KV_"+s.Bucket())
		require.NoError(t, err)
		cfg := st.CachedInfo().Config
		require.Equal(t, 3, cfg.Replicas)
		require.Equal(t, serverHasTTL(nc), cfg.AllowMsgTTL, "per-key TTLs on NATS %s", nc.ConnectedServerVersion())
	})

	t.Run("ServersExpireRecords", func(t *testing.T) {
		// With per-key TTLs a completed record past its retention leaves
		// the stream without any Purge; a lapsed lease stays, absent to
		// Get, for store.LapsedKept (its TTL is the lease plus that).
		if !serverHasTTL(nc) {
			t.Skipf("NATS %s has no per-key TTLs", nc.ConnectedServerVersion())
		}
		ctx := context.Background()
		s := newStore(t, nc, idemnats.WithReplicas(3))
		tok := store.NewToken()
		_, err := s.Claim(ctx, "done", "fp", tok, time.Minute)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, "done", tok, []byte("r"), 100*time.Millisecond))
		_, err = s.Claim(ctx, "lapsed", "fp", store.NewToken(), 100*time.Millisecond)
		require.NoError(t, err)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		eventually(t, 10*time.Second, "records gone from the stream", func() error {
			st, err := js.Stream(ctx, "KV_"+s.Bucket())
			if err != nil {
				return err
			}
			// The clock entry (1 minute TTL) stays; the markers the
			// servers leave for expired keys count as messages too.
			for _, k := range []string{"done", "lapsed"} {
				if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("Get(%s): %v, want ErrNotFound", k, err)
				}
			}
			subjects := st.CachedInfo().State.NumSubjects
			if subjects > 2 {
				return fmt.Errorf("%d subjects still in the stream (want the clock entry and the lapsed lease)", subjects)
			}
			return nil
		})
		e, err := s.Lookup(ctx, "lapsed")
		require.NoError(t, err, "the servers deleted a lapsed lease before store.LapsedKept")
		require.Equal(t, store.StateLapsed, e.State)
		_, err = s.Lookup(ctx, "done")
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// serverHasTTL reports whether nc's server is NATS 2.11 or later.
func serverHasTTL(nc *natsgo.Conn) bool {
	var major, minor int
	fmt.Sscanf(nc.ConnectedServerVersion(), "%d.%d", &major, &minor)
	return major > 2 || major == 2 && minor >= 11
}
