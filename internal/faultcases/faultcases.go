// Package faultcases holds the fault tests the SQL backends share: a store
// reached through a fault proxy (internal/faultproxy) that loses replies,
// black-holes the server or cuts every connection, and what the store must
// do then. Each backend's faults_test.go runs them under its own test names.
package faultcases

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/store"
)

// TxStore is a store with transactions (InTx).
type TxStore interface {
	store.Store
	store.Transactor
}

// New returns a store on its own table whose connections reach the server
// through the returned proxy.
type New func(t *testing.T) (TxStore, *faultproxy.Proxy)

// requireFailure checks that err is a failure of the call itself (a driver
// error), never one of the store's sentinels.
func requireFailure(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	for _, sentinel := range []error{store.ErrLeaseLost, store.ErrNotFound, store.ErrInvalid} {
		require.NotErrorIs(t, err, sentinel)
	}
}

// LostReplies: the server does the work but the reply never arrives.
// Every call fails with a driver error, and retrying it with the same token
// gives the answer the first call would have given.
func LostReplies(t *testing.T, proxied New) {
	ctx := context.Background()
	s, p := proxied(t)
	tok := store.NewToken()

	p.LoseReplyTo([]byte("lost-claim"))
	_, err := s.Claim(ctx, "lost-claim", "fp", tok, time.Minute)
	requireFailure(t, err)
	c, err := s.Claim(ctx, "lost-claim", "fp", tok, time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome, "the retried Claim holds the key it took")

	// A renewal whose reply is lost renewed; its retry renews again. The
	// renewal is recognised on the wire by its key (a Renew carries no
	// other text of its own).
	p.LoseReplyTo([]byte("lost-claim"))
	requireFailure(t, s.Renew(ctx, "lost-claim", tok, time.Minute))
	require.NoError(t, s.Renew(ctx, "lost-claim", tok, time.Minute), "the retried Renew finds the lease it extended")

	p.LoseReplyTo([]byte("done-response"))
	requireFailure(t, s.Complete(ctx, "lost-claim", tok, []byte("done-response"), time.Hour))
	require.NoError(t, s.Complete(ctx, "lost-claim", tok, []byte("done-response"), time.Hour))
	c, err = s.Claim(ctx, "lost-claim", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Completed, c.Outcome)
	require.Equal(t, []byte("done-response"), c.Record.Response)

	rel := store.NewToken()
	_, err = s.Claim(ctx, "lost-release", "fp", rel, time.Minute)
	require.NoError(t, err)
	p.LoseReplyTo([]byte("lost-release"))
	requireFailure(t, s.Release(ctx, "lost-release", rel))
	require.NoError(t, s.Release(ctx, "lost-release", rel))
	_, err = s.Get(ctx, "lost-release")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// LostCommitReply: the transaction commits but its reply is lost (the
// seeds' "crash between COMMIT and the response"): the retry replays the
// committed record instead of doing the work again.
func LostCommitReply(t *testing.T, proxied New, commit []byte, errPrefix string) {
	ctx := context.Background()
	s, p := proxied(t)
	runs := 0
	pay := func() (store.Outcome, error) {
		var out store.Outcome
		err := s.InTx(ctx, func(ctx context.Context, ts store.Store) error {
			tok := store.NewToken()
			c, err := ts.Claim(ctx, "k", "fp", tok, time.Minute)
			if err != nil {
				return err
			}
			out = c.Outcome
			if c.Outcome != store.Acquired {
				return nil
			}
			runs++
			return ts.Complete(ctx, "k", tok, []byte("paid"), time.Hour)
		})
		return out, err
	}
	p.LoseReplyTo(commit)
	_, err := pay()
	requireFailure(t, err)
	require.Contains(t, err.Error(), errPrefix)
	out, err := pay()
	require.NoError(t, err)
	require.Equal(t, store.Completed, out)
	require.Equal(t, 1, runs, "the work ran once")
}

// BlackholedServer: a server that stops answering (a network partition)
// does not hang a call past its context.
func BlackholedServer(t *testing.T, proxied New) {
	s, p := proxied(t)
	_, err := s.Get(context.Background(), "warm") // one live connection in the pool
	require.ErrorIs(t, err, store.ErrNotFound)
	p.SetBlackhole(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	requireFailure(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "error %v matches the context's", err)
	require.Less(t, time.Since(began), 5*time.Second)
	p.SetBlackhole(false)
}

// ConnectionsCutMidTransaction: every connection is cut while InTx's
// function runs (the server went away): the call fails, nothing commits,
// and the key is free once the server is back (has noticed).
func ConnectionsCutMidTransaction(t *testing.T, proxied New) {
	ctx := context.Background()
	s, p := proxied(t)
	err := s.InTx(ctx, func(ctx context.Context, ts store.Store) error {
		tok := store.NewToken()
		if _, err := ts.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
			return err
		}
		p.CutAll()
		return ts.Complete(ctx, "k", tok, []byte("half"), time.Hour)
	})
	requireFailure(t, err)
	c, err := s.Claim(ctx, "k", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome, "the key is free")
}
