// Package redacttest holds what the key-redaction tests of idem, httpidem
// and dedup share: a store whose errors quote the key, as the Redis and
// memory backends' errors do, and a buffer for the log lines under test.
package redacttest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// QuotingStore wraps a Store so that the Claim, Complete and Release calls
// Fail chooses fail with an error that quotes the key and wraps Err.
type QuotingStore struct {
	store.Store
	// Fail reports whether the n-th call of op ("claim", "complete",
	// "release", "renew") on key fails; nil fails none.
	Fail func(op, key string, n int) bool
	// Err is what a failed call's error wraps.
	Err error

	mu sync.Mutex
	n  map[string]int
}

func (q *QuotingStore) failed(op, key string) error {
	q.mu.Lock()
	if q.n == nil {
		q.n = map[string]int{}
	}
	q.n[op+key]++
	n := q.n[op+key]
	q.mu.Unlock()
	if q.Fail != nil && q.Fail(op, key, n) {
		return fmt.Errorf("test: %s: key %q: %w", op, key, q.Err)
	}
	return nil
}

// Claim implements store.Store.
func (q *QuotingStore) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	if err := q.failed("claim", key); err != nil {
		return store.Claim{}, err
	}
	return q.Store.Claim(ctx, key, fp, tok, lease)
}

// Complete implements store.Store.
func (q *QuotingStore) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	if err := q.failed("complete", key); err != nil {
		return err
	}
	return q.Store.Complete(ctx, key, tok, resp, retention)
}

// Release implements store.Store.
func (q *QuotingStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := q.failed("release", key); err != nil {
		return err
	}
	return q.Store.Release(ctx, key, tok)
}

// Renew fails, as Claim does, when the key contains Needle.
func (q *QuotingStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := q.failed("renew", key); err != nil {
		return err
	}
	return q.Store.Renew(ctx, key, tok, lease)
}

// Buffer is a bytes.Buffer safe for concurrent writes, for a log handler.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
