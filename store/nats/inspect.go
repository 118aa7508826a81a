package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// inspectBatch is how many entries List and Count read at a time; bodies
// are read (the token and the fingerprint are in them), so memory is
// bounded by this many of the largest record.
const inspectBatch = 64

// List implements store.Inspector by reading the latest entry of every key
// with an ordered consumer (as Purge does), a batch at a time, and keeping
// only the page being built (store.PageScan): a page costs a pass over the
// bucket, on the servers' clock, and never blocks a writer. Lapsed and
// expired records are listed until Purge, or their per-message TTL on NATS
// 2.11 and later, removes them.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	scan, err := store.NewPageScan(o)
	if err != nil {
		return store.Page{}, fmt.Errorf("nats: %w", err)
	}
	if err := s.eachEntry(ctx, o.Prefix, scan.Offer); err != nil {
		return store.Page{}, fmt.Errorf("nats: list: %w", err)
	}
	return scan.Page(), nil
}

// Count implements store.Inspector, with one pass as List makes.
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	if err := s.eachEntry(ctx, "", c.Add); err != nil {
		return store.Counts{}, fmt.Errorf("nats: count: %w", err)
	}
	return c, nil
}

// Lookup implements store.Inspector with one read of the key's entry.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("nats: lookup: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Entry{}, fmt.Errorf("nats: lookup: %w", err)
	}
	if _, err := s.bucketInfo(ctx); err != nil {
		return store.Entry{}, fmt.Errorf("nats: lookup: %w", err)
	}
	f, err := s.read(ctx, s.prefix+keyToken(key))
	if err != nil {
		return store.Entry{}, fmt.Errorf("nats: lookup: %w", err)
	}
	if f.rec.status == 0 { // no message, or a marker
		return store.Entry{}, fmt.Errorf("nats: lookup %q: %w", key, store.ErrNotFound)
	}
	return f.rec.entry(key, f.stamp, f.absent), nil
}

// entry is what an Inspector shows of r, written at stamp; over says its
// deadline has passed on the servers' clock.
func (r record) entry(key string, stamp time.Time, over bool) store.Entry {
	e := store.NewEntry(r.toRecord(key, stamp), time.Time{})
	e.State = store.StateOf(r.status, over)
	return e
}

// eachEntry calls f with the entry of every record whose key starts with
// prefix, skipping markers and the store's own entries.
func (s *Store) eachEntry(ctx context.Context, prefix string, f func(store.Entry)) error {
	// The read is tried again while no stream leader answers, as long as
	// it has offered nothing yet (so no entry is offered twice).
	offered := false
	g := func(e store.Entry) { offered = true; f(e) }
	return retryLeader(ctx, func() (bool, error) {
		return !offered, s.eachEntryOnce(ctx, prefix, g)
	})
}

// retryLeader calls f until it succeeds, fails with an error other than
// "no stream leader answered", reports it may not be tried again, or
// inspectRetry has passed. A bucket's stream that is electing a leader (a
// new bucket on a cluster, a failover) answers no one for a moment.
func retryLeader(ctx context.Context, f func() (again bool, err error)) error {
	deadline := time.Now().Add(inspectRetry)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		again, err := f()
		if err == nil || !again || time.Now().After(deadline) || !noLeader(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// noLeader reports whether err says no server answered for the stream.
func noLeader(err error) bool {
	return errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// inspectRetry bounds how long a look inside or a Purge waits for a
// stream leader.
const inspectRetry = 5 * time.Second

func (s *Store) eachEntryOnce(ctx context.Context, prefix string, f func(store.Entry)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.bucketInfo(ctx); err != nil {
		return err
	}
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return err
	}
	if st.CachedInfo().State.Msgs == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return err
	}
	now, err := s.clock.now(ctx)
	if err != nil {
		return err
	}
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(inspectBatch, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			return err
		}
		done, got := false, 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				cancel()
				return err
			}
			done = md.NumPending == 0
			s.offer(m, md, prefix, now, f)
			if done {
				break // the last entry: do not wait out the fetch for more
			}
		}
		berr := batch.Error()
		cancel()
		if berr != nil && !errors.Is(berr, jetstream.ErrNoHeartbeat) && !errors.Is(berr, context.DeadlineExceeded) {
			return berr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if done || got == 0 {
			return nil
		}
	}
}

// offer calls f with the entry of m, the latest message of its key, unless
// m is the clock entry, a marker, not a record, or its key lacks prefix.
func (s *Store) offer(m jetstream.Msg, md *jetstream.MsgMetadata, prefix string, now time.Time, f func(store.Entry)) {
	key, ok := keyOf(strings.TrimPrefix(m.Subject(), s.prefix))
	h := m.Headers()
	if !ok || !strings.HasPrefix(key, prefix) || h.Get(kvOpHeader) != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
		return
	}
	r, err := decodeRecord(m.Data(), h.Get(lifeHeader))
	if err != nil {
		return
	}
	f(r.entry(key, md.Timestamp, !now.Before(md.Timestamp.Add(r.life))))
}
