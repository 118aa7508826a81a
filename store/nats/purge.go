package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// purgeBatch is how many entries Purge reads from the bucket at a time.
const purgeBatch = 256

// Purge deletes the records whose lease or retention is over, and the
// markers Release leaves, and reports how many records it deleted. On NATS
// 2.11 and later with a bucket made by Migrate the servers do this by
// themselves (each entry carries a TTL) and Purge finds little; on older
// servers run it periodically (package purge does).
//
// It reads the latest entry of every key, headers only, in batches, and
// deletes an expired one by purging the key's messages up to and including
// that revision: a newer write to the key (a takeover, a claim after a
// release) is never touched. It stops with ctx's error when ctx is done.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("nats: purge: %w", err)
	}
	n, err := s.purge(ctx)
	if err != nil {
		return n, fmt.Errorf("nats: purge: %w", err)
	}
	return n, nil
}

func (s *Store) purge(ctx context.Context) (int64, error) {
	if _, err := s.bucketInfo(ctx); err != nil {
		return 0, err
	}
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return 0, err
	}
	if st.CachedInfo().State.Msgs == 0 {
		return 0, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return 0, err
	}
	now, err := s.clock.now(ctx)
	if err != nil {
		return 0, err
	}
	var deleted int64
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(purgeBatch, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return deleted, err
		}
		done := false
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				cancel()
				return deleted, err
			}
			done = md.NumPending == 0
			token := strings.TrimPrefix(m.Subject(), s.prefix)
			if _, ok := keyOf(token); !ok {
				continue // the clock entry
			}
			h := m.Headers()
			record := h.Get(kvOpHeader) == "" && h.Get(jetstream.MarkerReasonHeader) == ""
			if record {
				ns, err := strconv.ParseInt(h.Get(lifeHeader), 10, 64)
				if err == nil && now.Before(md.Timestamp.Add(time.Duration(ns))) {
					continue // live
				}
			}
			err = st.Purge(ctx, jetstream.WithPurgeSubject(m.Subject()), jetstream.WithPurgeSequence(md.Sequence.Stream+1))
			if err != nil {
				cancel()
				return deleted, err
			}
			if record {
				deleted++
			}
		}
		berr := batch.Error()
		cancel()
		if berr != nil && !errors.Is(berr, jetstream.ErrNoHeartbeat) && !errors.Is(berr, context.DeadlineExceeded) {
			return deleted, berr
		}
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		if done || got == 0 {
			return deleted, nil
		}
	}
}
