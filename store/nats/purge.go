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

// Purge deletes the records whose retention is over, the leases that
// lapsed more than store.LapsedKept ago, and the markers Release leaves,
// and reports how many records it deleted. On NATS
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
	// Purge is safe to start again: what it deleted is gone, what it did
	// not is found again. So it is, while no stream leader answers.
	var n int64
	err := retryLeader(ctx, func() (bool, error) {
		d, err := s.purge(ctx)
		n += d
		return true, err
	})
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
			n, err := s.purgeEntry(ctx, st, m, md, now)
			deleted += n
			if err != nil {
				cancel()
				return deleted, err
			}
			if done = md.NumPending == 0; done {
				break // the batch would wait out its time for messages that will not come
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

// purgeEntry deletes the key's latest entry m if it is a marker, a
// completed record past its retention, or a lease that lapsed more than
// store.LapsedKept ago, and reports 1 for a record deleted.
func (s *Store) purgeEntry(ctx context.Context, st jetstream.Stream, m jetstream.Msg, md *jetstream.MsgMetadata, now time.Time) (int64, error) {
	if _, ok := keyOf(strings.TrimPrefix(m.Subject(), s.prefix)); !ok {
		return 0, nil // the clock entry
	}
	h := m.Headers()
	record := h.Get(kvOpHeader) == "" && h.Get(jetstream.MarkerReasonHeader) == ""
	if record {
		if ns, err := strconv.ParseInt(h.Get(lifeHeader), 10, 64); err == nil {
			deadline := md.Timestamp.Add(time.Duration(ns))
			if now.Before(deadline) {
				return 0, nil // live
			}
			kept, err := s.keptFor(ctx, m, md)
			if err != nil {
				return 0, err
			}
			if now.Before(deadline.Add(kept)) {
				return 0, nil // a lapsed lease, kept for the attempt count
			}
		}
	}
	err := st.Purge(ctx, jetstream.WithPurgeSubject(m.Subject()), jetstream.WithPurgeSequence(md.Sequence.Stream+1))
	if err != nil || !record {
		return 0, err
	}
	return 1, nil
}

// keptFor returns how long the record m (headers only) is kept past its
// deadline: its keptHeader, or for a record written before that header
// (version 1), store.LapsedKept if its body, read again, is a lease, and a
// long time (keep it for now) when the key has moved on since.
func (s *Store) keptFor(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) (time.Duration, error) {
	if ns, err := strconv.ParseInt(m.Headers().Get(keptHeader), 10, 64); err == nil {
		return time.Duration(ns), nil
	}
	got, err := s.load(ctx, m.Subject())
	if err != nil {
		return 0, err
	}
	if got == nil || got.Seq != md.Sequence.Stream {
		return forever, nil // written again meanwhile: the next Purge decides
	}
	r, err := decodeRecord(got.Data, got.header.Get(lifeHeader))
	if err != nil {
		return 0, nil // not a record Claim can read: delete it as before
	}
	return r.kept(), nil
}

// forever keeps a record past any deadline.
const forever = time.Duration(1<<63 - 1)
