package cache

import (
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// shard is one lock's share of the cache: a map and a least-recently-used
// list, bounded in entries and bytes.
type shard struct {
	mu         sync.Mutex
	m          map[string]*entry
	head       entry // sentinel: head.next is the most recently used
	maxEntries int
	maxBytes   int64
	bytes      int64

	hits, misses, fills, evictions, expired int64
}

// entry is one cached completed record.
type entry struct {
	key        string
	rec        store.Record
	size       int64
	prev, next *entry
}

func (s *shard) init(maxEntries int, maxBytes int64) {
	s.m = make(map[string]*entry)
	s.head.prev, s.head.next = &s.head, &s.head
	s.maxEntries, s.maxBytes = maxEntries, maxBytes
}

func (s *shard) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = &s.head, s.head.next
	s.head.next.prev = e
	s.head.next = e
}

// drop removes e; the caller holds the lock.
func (s *shard) drop(e *entry) {
	s.unlink(e)
	delete(s.m, e.key)
	s.bytes -= e.size
}

// lookup returns a copy of key's cached record when its ExpiresAt is after
// deadline and, with checkFP, its fingerprint is fp. A record past the
// deadline is dropped. It counts a hit or a miss.
func (s *shard) lookup(key, fp string, checkFP bool, deadline time.Time) (store.Record, bool) {
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && !e.rec.ExpiresAt.After(deadline) {
		s.drop(e)
		s.expired++
		ok = false
	}
	if !ok || (checkFP && e.rec.Fingerprint != fp) {
		s.misses++
		s.mu.Unlock()
		return store.Record{}, false
	}
	s.hits++
	if s.head.next != e {
		s.unlink(e)
		s.pushFront(e)
	}
	r := e.rec
	s.mu.Unlock()
	// The cached response is never written after fill, so it is copied
	// outside the lock.
	return cloneRecord(r), true
}

// fill caches r, a completed record the store just returned for key, unless
// it expires by deadline or is too large for the shard. A record already cached
// for key is the same completed record (it never changes until it expires);
// the earlier ExpiresAt of the two is kept.
func (s *shard) fill(key string, r store.Record, deadline time.Time) {
	if r.Status != store.StatusCompleted || !r.ExpiresAt.After(deadline) {
		return
	}
	size := recordSize(key, &r)
	if size > s.maxBytes || s.maxEntries == 0 {
		return
	}
	r = cloneRecord(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[key]; ok {
		if old.rec.Fingerprint == r.Fingerprint && old.rec.Token == r.Token && !old.rec.ExpiresAt.After(r.ExpiresAt) {
			return
		}
		s.drop(old)
	}
	for len(s.m) >= s.maxEntries || s.bytes+size > s.maxBytes {
		s.drop(s.head.prev)
		s.evictions++
	}
	e := &entry{key: key, rec: r, size: size}
	s.m[key] = e
	s.pushFront(e)
	s.bytes += size
	s.fills++
}

func (s *shard) remove(key string) {
	s.mu.Lock()
	if e, ok := s.m[key]; ok {
		s.drop(e)
	}
	s.mu.Unlock()
}

func (s *shard) clear() {
	s.mu.Lock()
	clear(s.m)
	s.head.prev, s.head.next = &s.head, &s.head
	s.bytes = 0
	s.mu.Unlock()
}

func (s *shard) addStats(st *Stats) {
	s.mu.Lock()
	st.Hits += s.hits
	st.Misses += s.misses
	st.Fills += s.fills
	st.Evictions += s.evictions
	st.Expired += s.expired
	st.Entries += int64(len(s.m))
	st.Bytes += s.bytes
	s.mu.Unlock()
}
