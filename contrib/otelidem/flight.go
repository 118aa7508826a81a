package otelidem

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// flightShards spreads the held runs over this many locks, so that runs
// acquiring and settling at once rarely wait on one another.
const flightShards = 16

// flight tracks the runs that hold a key (acquired, not yet settled), for
// the idem.inflight.oldest_age gauge. Each shard is a min-heap of those
// runs by acquisition time: adding or removing a run costs O(log n) in the
// runs its shard holds, reading the oldest costs O(flightShards), and the
// memory held is one entry per run in flight, nothing for a settled one.
type flight struct {
	next   atomic.Uint32
	shards [flightShards]flightShard
}

type flightShard struct {
	mu   sync.Mutex
	runs flightHeap
}

// flightEntry is one held run's place in its shard's heap, a field of the
// run (no allocation per run). at and index belong to the shard's lock;
// add and remove of one entry are ordered by the run's own lock.
type flightEntry struct {
	at    time.Time // when the run acquired its key
	index int       // its position in the heap; -1 once removed
	shard *flightShard
}

// add records a run that acquired its key at at, as e, which must not be
// held already; give e to remove when the run settles.
func (f *flight) add(e *flightEntry, at time.Time) {
	s := &f.shards[f.next.Add(1)%flightShards]
	e.shard = s
	s.mu.Lock()
	e.at = at
	heap.Push(&s.runs, e)
	s.mu.Unlock()
}

// remove forgets a run that settled. Removing an entry twice, or one never
// added, does nothing.
func (f *flight) remove(e *flightEntry) {
	s := e.shard
	if s == nil {
		return
	}
	s.mu.Lock()
	if e.index >= 0 {
		heap.Remove(&s.runs, e.index)
	}
	s.mu.Unlock()
}

// oldest returns when the oldest run still holding its key acquired it, and
// false when no run holds one.
func (f *flight) oldest() (time.Time, bool) {
	var min time.Time
	found := false
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		if len(s.runs) > 0 && (!found || s.runs[0].at.Before(min)) {
			min, found = s.runs[0].at, true
		}
		s.mu.Unlock()
	}
	return min, found
}

// len returns how many runs hold a key (for tests).
func (f *flight) len() int {
	n := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		n += len(s.runs)
		s.mu.Unlock()
	}
	return n
}

// flightHeap is a container/heap of entries, earliest acquisition first.
type flightHeap []*flightEntry

func (h flightHeap) Len() int           { return len(h) }
func (h flightHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h flightHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *flightHeap) Push(x any) {
	e := x.(*flightEntry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *flightHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil // the settled run is not kept alive by the backing array
	e.index = -1
	*h = old[:n-1]
	if cap(*h) > 64 && len(*h) < cap(*h)/4 {
		// After a burst, give the memory back.
		*h = append(flightHeap(nil), *h...)
	}
	return e
}
