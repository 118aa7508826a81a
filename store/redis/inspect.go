package redis

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

var _ store.Inspector = (*Store)(nil)

// scanCount is the COUNT hint of each SCAN, and so the most keys whose
// headers one round trip reads.
const scanCount = 256

// maxHead is the longest header, token and fingerprint of a record: what
// GETRANGE reads of each, never its response.
const maxHead = headerSize + store.MaxTokenLen + store.MaxFingerprintLen

// stagingSuffix matches the end of a staging key (stageSuffix), which List
// skips: it holds a completed value only for the instant before it is
// renamed over its record.
var stagingSuffix = regexp.MustCompile(`:stage:[A-Z2-7]{10}:[0-9a-z]+$`)

// List implements store.Inspector with SCAN over the Store's prefix on
// every master of a Cluster (every shard of a Ring), never KEYS: each
// round trip reads at most scanCount keys' headers with GETRANGE (never a
// response) and their lengths, and only the page being built is kept
// (store.PageScan), so a page costs a pass over the prefix in bounded
// memory and never blocks the server for long.
//
// Redis deletes a completed record when its retention ends, so the store
// never holds an expired record: List with that state, and its Count, are
// always empty, and Lookup of such a key finds nothing. A record in
// progress is kept for store.LapsedKept after its lease (its PTTL tells
// the two apart on the server's clock) and is listed as lapsed until
// Redis deletes it.
func (s *Store) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	scan, err := store.NewPageScan(o)
	if err != nil {
		return store.Page{}, fmt.Errorf("redis: %w", err)
	}
	if o.State == store.StateExpired {
		return store.Page{}, nil // Redis keeps none
	}
	if err := s.eachEntry(ctx, o.Prefix, scan.Offer); err != nil {
		return store.Page{}, s.fail(ctx, "list", err)
	}
	return scan.Page(), nil
}

// Count implements store.Inspector with one pass as List makes.
func (s *Store) Count(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	if err := s.eachEntry(ctx, "", c.Add); err != nil {
		return store.Counts{}, s.fail(ctx, "count", err)
	}
	return c, nil
}

// Lookup implements store.Inspector with one GETRANGE, one STRLEN and one
// PTTL, in one round trip.
func (s *Store) Lookup(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("redis: lookup: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return store.Entry{}, fmt.Errorf("redis: lookup: %w", err)
	}
	var head *goredis.StringCmd
	var size *goredis.IntCmd
	var pttl *goredis.DurationCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.GetRange(ctx, s.prefix+key, 0, maxHead-1)
		size = p.StrLen(ctx, s.prefix+key)
		pttl = p.PTTL(ctx, s.prefix+key)
		return nil
	})
	if err != nil {
		return store.Entry{}, s.fail(ctx, "lookup", err)
	}
	if head.Val() == "" {
		return store.Entry{}, fmt.Errorf("redis: lookup %q: %w", key, store.ErrNotFound)
	}
	e, err := headEntry(key, head.Val(), size.Val(), pttl.Val(), s.now)
	if err != nil {
		return store.Entry{}, fmt.Errorf("redis: lookup %q: %w", key, err)
	}
	return e, nil
}

// eachEntry calls f, never concurrently, with the entry of every record
// whose key starts with prefix, scanning every master of a Cluster (or
// shard of a Ring) at once. Keys that vanish between SCAN and GETRANGE,
// staging keys and values that are not records are skipped.
func (s *Store) eachEntry(ctx context.Context, prefix string, f func(store.Entry)) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	offer := func(e store.Entry) {
		mu.Lock()
		defer mu.Unlock()
		f(e)
	}
	match := globEscape(s.prefix+prefix) + "*"
	node := func(ctx context.Context, c *goredis.Client) error { return s.scanNode(ctx, c, match, offer) }
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, node)
	case *goredis.Ring:
		return c.ForEachShard(ctx, node)
	case *goredis.Client:
		return node(ctx, c)
	}
	return fmt.Errorf("cannot scan a %T: pass a *redis.Client, *redis.ClusterClient or *redis.Ring", s.client)
}

// scanNode SCANs one server for match and offers the entries it finds.
func (s *Store) scanNode(ctx context.Context, c *goredis.Client, match string, offer func(store.Entry)) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			heads := make([]*goredis.StringCmd, len(keys))
			sizes := make([]*goredis.IntCmd, len(keys))
			pttls := make([]*goredis.DurationCmd, len(keys))
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, k := range keys {
					heads[i] = p.GetRange(ctx, k, 0, maxHead-1)
					sizes[i] = p.StrLen(ctx, k)
					pttls[i] = p.PTTL(ctx, k)
				}
				return nil
			})
			if err != nil && !isReplyError(err) {
				return err
			}
			for i, k := range keys {
				if err := heads[i].Err(); err != nil && !isReplyError(err) {
					return err
				}
				if heads[i].Val() == "" || stagingSuffix.MatchString(k) {
					continue // gone since SCAN, not a string (WRONGTYPE), or a staging key
				}
				if e, err := headEntry(strings.TrimPrefix(k, s.prefix), heads[i].Val(), sizes[i].Val(), pttls[i].Val(), s.now); err == nil {
					offer(e)
				}
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// isReplyError reports whether err is the server's answer to one command
// (WRONGTYPE for a key under the prefix that is not a string), not a
// failure of the connection.
func isReplyError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && !errors.Is(err, goredis.Nil)
}

// headEntry builds the entry of key from the first bytes of its value
// (at least the header, token and fingerprint), the value's length and its
// PTTL. The record exists, so it is live, unless it is a record in
// progress whose lease lapsed (leaseLive), kept for store.LapsedKept:
// lapsed.
func headEntry(key, head string, size int64, pttl time.Duration, now func() time.Time) (store.Entry, error) {
	h := 0
	if len(head) > 0 {
		h = headerLen(head[0])
	}
	if h == 0 || len(head) < h {
		return store.Entry{}, fmt.Errorf("%w: %d bytes, not a record header", errCorrupt, len(head))
	}
	n := int(head[offTokLen])
	m := int(head[offFPLen])<<8 | int(head[offFPLen+1])
	if len(head) > h+n+m {
		head = head[:h+n+m] // the response is not decode's to check here
	}
	r, err := decode(key, head)
	if err != nil {
		return store.Entry{}, err
	}
	e := store.NewEntry(r, time.Time{})
	if !leaseLive(head, pttl, now) {
		e.State = store.StateLapsed
	}
	e.ResponseSize = int(size) - h - n - m
	return e, nil
}

// globEscape escapes the characters SCAN's MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
