package idem

import (
	"sync"
	"time"
)

// wheel arms the first renewal of every held key of one engine with one
// timer: the heartbeats wait in a list ordered by when their first renewal
// is due, and the timer fires for the list's head. A heartbeat stopped
// before it is due leaves the list (no goroutine, channel or timer of its
// own ever existed); one that comes due gets its renewal loop, on a
// goroutine of its own, from then on. With every lease of an engine the same
// length, a new heartbeat almost always goes to the list's tail, without
// touching the timer; a run whose lease is shorter (WithLeaseFromDeadline)
// is inserted in order from the head, the nearer end.
type wheel struct {
	mu         sync.Mutex
	head, tail *heartbeat
	timer      *time.Timer // made on first use, fires wheel.fire
	armed      time.Time   // when timer fires; zero when not armed
}

// add puts hb in the list, due at due.
func (w *wheel) add(hb *heartbeat, due time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hb.due, hb.queued = due, true
	// Insert after at, found from the nearer end: with leases of one
	// length that is the tail at once; a shorter lease among longer ones
	// (WithLeaseFromDeadline) is found from the head.
	var at *heartbeat
	if w.head != nil && due.Sub(w.head.due) < w.tail.due.Sub(due) {
		for next := w.head; next != nil && !next.due.After(due); next = next.next {
			at = next
		}
	} else {
		at = w.tail
		for at != nil && at.due.After(due) {
			at = at.prev
		}
	}
	hb.prev = at
	if at == nil {
		hb.next, w.head = w.head, hb
	} else {
		hb.next, at.next = at.next, hb
	}
	if hb.next == nil {
		w.tail = hb
	} else {
		hb.next.prev = hb
	}
	if w.head == hb && (w.armed.IsZero() || due.Before(w.armed)) {
		w.armLocked(due)
	}
}

func (w *wheel) armLocked(due time.Time) {
	w.armed = due
	d := max(time.Until(due), 0)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
		return
	}
	w.timer.Reset(d)
}

// remove takes hb out of the list and reports whether it was there (not
// yet due).
func (w *wheel) remove(hb *heartbeat) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !hb.queued {
		return false
	}
	w.unlinkLocked(hb)
	return true
}

func (w *wheel) unlinkLocked(hb *heartbeat) {
	if hb.prev == nil {
		w.head = hb.next
	} else {
		hb.prev.next = hb.next
	}
	if hb.next == nil {
		w.tail = hb.prev
	} else {
		hb.next.prev = hb.prev
	}
	hb.prev, hb.next, hb.queued = nil, nil, false
}

// fire starts the loop of every heartbeat now due, and arms the timer for
// the next.
func (w *wheel) fire() {
	w.mu.Lock()
	now := time.Now()
	var due []*heartbeat
	for w.head != nil && !w.head.due.After(now) {
		hb := w.head
		w.unlinkLocked(hb)
		due = append(due, hb)
	}
	w.armed = time.Time{}
	if w.head != nil {
		w.armLocked(w.head.due)
	}
	w.mu.Unlock()
	for _, hb := range due {
		go hb.run()
	}
}
