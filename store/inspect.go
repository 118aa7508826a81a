package store

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Inspector is implemented by stores that let an operator look inside: list
// the records in a state, oldest first, a page at a time, and count them.
// It is for tools such as cmd/idemctl, not for the request path: every
// backend serves it without blocking writers, in memory bounded by the page
// size, but a page may cost a scan of the store (see each backend's
// List). Callers discover it with a type assertion.
//
// An Inspector reports what it holds as of the store's clock. The four
// states are those of StateOf. Every backend keeps a lapsed lease for
// LapsedKept; a backend whose engine deletes completed records when their
// retention ends (Redis) never holds an expired record, so that state is
// always empty there.
//
// No Entry carries a Token: an operator sees HashToken of it, enough to
// tell two holders apart without being able to act as either.
type Inspector interface {
	// List returns the records that match o, ordered by ExpiresAt and then
	// by key (byte for byte), oldest first, at most o.Limit of them, and
	// the cursor of the next page (empty after the last). Following the
	// cursors from an empty one visits every record that matched
	// throughout, each once; a record written meanwhile may or may not be
	// seen, and one whose deadline moved (a renewed lease, a completion)
	// may be seen twice, at its old and its new place. Invalid options (an
	// unknown state, a negative or too large limit, a cursor not made by
	// List) are an error matching ErrInvalid.
	List(ctx context.Context, o ListOptions) (Page, error)
	// Count reports how many records the store holds in each state, and the
	// earliest lease deadline among those in progress.
	Count(ctx context.Context) (Counts, error)
	// Lookup returns the record held under key in any state, lapsed and
	// expired included, or an error matching ErrNotFound when the store
	// holds none.
	Lookup(ctx context.Context, key string) (Entry, error)
}

// State is where a record stands as an Inspector sees it: the Status of
// the record and whether its deadline has passed.
type State uint8

const (
	// StateInProgress: claimed, the lease not yet over.
	StateInProgress State = iota + 1
	// StateLapsed: claimed, the lease over and no one has claimed the key
	// since. The key is free: the next Claim takes it over.
	StateLapsed
	// StateCompleted: completed, the retention not yet over.
	StateCompleted
	// StateExpired: completed, the retention over, not yet purged. The key
	// is free, as if never claimed.
	StateExpired
)

var stateNames = [...]string{StateInProgress: "in_progress", StateLapsed: "lapsed", StateCompleted: "completed", StateExpired: "expired"}

// String returns "in_progress", "lapsed", "completed", "expired", or
// "State(N)" for an unknown value. ParseState reads the four names back.
func (s State) String() string {
	if s >= StateInProgress && s <= StateExpired {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// ParseState returns the State that String names ("in_progress", "lapsed",
// "completed" or "expired"). Any other text is an error matching
// ErrInvalid.
func ParseState(s string) (State, error) {
	for st := StateInProgress; st <= StateExpired; st++ {
		if stateNames[st] == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown state %q (want in_progress, lapsed, completed or expired)", ErrInvalid, s)
}

// StateOf returns the State of a record of status st whose deadline
// (ExpiresAt) is over or not: over from the instant the store's clock
// reaches ExpiresAt, as Classify decides.
func StateOf(st Status, over bool) State {
	switch {
	case st == StatusCompleted && over:
		return StateExpired
	case st == StatusCompleted:
		return StateCompleted
	case over:
		return StateLapsed
	}
	return StateInProgress
}

// Split returns the Status of the records in state s and whether their
// deadline is over (StateOf backwards), for a backend that filters on
// both; ok is false for the zero State and unknown values.
func (s State) Split() (st Status, over, ok bool) {
	switch s {
	case StateInProgress:
		return StatusInProgress, false, true
	case StateLapsed:
		return StatusInProgress, true, true
	case StateCompleted:
		return StatusCompleted, false, true
	case StateExpired:
		return StatusCompleted, true, true
	}
	return 0, false, false
}

// Free reports whether a record in state s leaves its key free: the next
// Claim of the key acquires it (lapsed and expired records).
func (s State) Free() bool { return s == StateLapsed || s == StateExpired }

// Limits of ListOptions.Limit.
const (
	DefaultListLimit = 100  // entries per page when ListOptions.Limit is 0
	MaxListLimit     = 1000 // the largest ListOptions.Limit
)

// ListOptions selects the records Inspector.List returns.
type ListOptions struct {
	// State keeps only the records in this state; zero keeps every state.
	State State
	// Prefix keeps only the keys that start with it, byte for byte.
	Prefix string
	// ExpiresBefore, when not zero, keeps only the records whose ExpiresAt
	// is before it: a lease or retention that ended (or ends) by then.
	ExpiresBefore time.Time
	// Cursor is the Page.Next of the previous page; empty for the first.
	Cursor string
	// Limit is the most entries a page holds: 0 for DefaultListLimit, at
	// most MaxListLimit.
	Limit int
}

// Check validates o and returns the position its cursor stands at (zero
// values for an empty cursor) and its limit with the default applied.
// Backends call it before touching storage; the error matches ErrInvalid.
func (o ListOptions) Check() (after Position, limit int, err error) {
	if o.State > StateExpired {
		return Position{}, 0, fmt.Errorf("%w: list: unknown state %d", ErrInvalid, o.State)
	}
	switch {
	case o.Limit < 0 || o.Limit > MaxListLimit:
		return Position{}, 0, fmt.Errorf("%w: list: limit %d out of range (0 for %d, at most %d)", ErrInvalid, o.Limit, DefaultListLimit, MaxListLimit)
	case o.Limit == 0:
		limit = DefaultListLimit
	default:
		limit = o.Limit
	}
	if len(o.Prefix) > MaxKeyLen {
		return Position{}, 0, fmt.Errorf("%w: list: prefix is %d bytes, longer than %d", ErrInvalid, len(o.Prefix), MaxKeyLen)
	}
	if o.Cursor != "" {
		if after, err = decodeCursor(o.Cursor); err != nil {
			return Position{}, 0, err
		}
	}
	return after, limit, nil
}

// Match reports whether an entry passes o's state, prefix and ExpiresBefore
// filters (not its cursor: see Position.Before).
func (o ListOptions) Match(e Entry) bool {
	return (o.State == 0 || e.State == o.State) &&
		strings.HasPrefix(e.Key, o.Prefix) &&
		(o.ExpiresBefore.IsZero() || e.ExpiresAt.Before(o.ExpiresBefore))
}

// Position is where an entry stands in List's order: its ExpiresAt, then
// its key. The zero Position stands before every entry.
type Position struct {
	ExpiresAt time.Time // zero: before every entry
	Key       string
}

// PositionOf returns e's position.
func PositionOf(e Entry) Position { return Position{ExpiresAt: e.ExpiresAt, Key: e.Key} }

// Before reports whether p comes before q in List's order.
func (p Position) Before(q Position) bool {
	if p.ExpiresAt.IsZero() != q.ExpiresAt.IsZero() {
		return p.ExpiresAt.IsZero()
	}
	if !p.ExpiresAt.Equal(q.ExpiresAt) {
		return p.ExpiresAt.Before(q.ExpiresAt)
	}
	return p.Key < q.Key
}

// Cursor returns the cursor of a page that ends at p: the next page starts
// after p.
func (p Position) Cursor() string {
	b := make([]byte, 8, 8+len(p.Key))
	binary.BigEndian.PutUint64(b, uint64(p.ExpiresAt.UnixNano()))
	return base64.RawURLEncoding.EncodeToString(append(b, p.Key...))
}

func decodeCursor(c string) (Position, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 8 || len(b)-8 > MaxKeyLen {
		return Position{}, fmt.Errorf("%w: list: cursor %q was not made by List", ErrInvalid, c)
	}
	return Position{ExpiresAt: time.Unix(0, int64(binary.BigEndian.Uint64(b))), Key: string(b[8:])}, nil
}

// Entry is what an Inspector shows of one record. It holds no token and no
// response: Lookup's caller who needs the response reads it with Get.
type Entry struct {
	// Key is the key as stored.
	Key string
	// State is the record's state as of the store's clock when it was read.
	State State
	// TokenHash is HashToken of the token that holds (in progress, lapsed)
	// or completed the record.
	TokenHash string
	// FingerprintSize and ResponseSize are the lengths in bytes of the
	// record's fingerprint and of its response (zero while in progress).
	FingerprintSize, ResponseSize int
	// LockedUntil is when the lease ends (in progress, lapsed); zero for a
	// completed record.
	LockedUntil time.Time
	// ExpiresAt is when the record stops holding its key: the end of the
	// lease, or of the retention once completed.
	ExpiresAt time.Time
	// Attempt and Fence are the record's (Record.Attempt, Record.Fence).
	Attempt uint32
	Fence   uint64
}

// NewEntry returns the Entry of r at now, as the store's clock reads it.
func NewEntry(r Record, now time.Time) Entry {
	e := Entry{
		Key:             r.Key,
		State:           StateOf(r.Status, !r.ExpiresAt.After(now)),
		TokenHash:       HashToken(r.Token),
		FingerprintSize: len(r.Fingerprint),
		ResponseSize:    len(r.Response),
		ExpiresAt:       r.ExpiresAt,
		Attempt:         r.Attempt,
		Fence:           r.Fence,
	}
	if r.Status == StatusInProgress {
		e.LockedUntil = r.ExpiresAt
	}
	return e
}

// HashToken returns the first 16 hexadecimal digits of the SHA-256 of t: it
// tells two holders apart in an operator's listing and audit log, and
// gives nothing that could Complete or Release the key.
func HashToken(t Token) string {
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:8])
}

// Page is one page of Inspector.List.
type Page struct {
	// Entries are in List's order.
	Entries []Entry
	// Next is the cursor of the next page, empty when this is the last.
	Next string
}

// PageOf returns the page of a backend that read up to limit+1 entries in
// List's order: the first limit, and the cursor after the last of them
// when there were more.
func PageOf(entries []Entry, limit int) Page {
	if len(entries) <= limit {
		return Page{Entries: entries}
	}
	entries = entries[:limit]
	return Page{Entries: entries, Next: PositionOf(entries[limit-1]).Cursor()}
}

// Counts is what Inspector.Count reports.
type Counts struct {
	InProgress, Lapsed, Completed, Expired int64
	// OldestLease is the earliest LockedUntil among the records in progress
	// (not lapsed), zero when there is none. The stores keep no claim time,
	// and a renewal moves the deadline, so this is how soon the oldest
	// unrenewed lease ends, not when it began.
	OldestLease time.Time
}

// Add counts e in c.
func (c *Counts) Add(e Entry) {
	switch e.State {
	case StateInProgress:
		c.InProgress++
		if c.OldestLease.IsZero() || e.LockedUntil.Before(c.OldestLease) {
			c.OldestLease = e.LockedUntil
		}
	case StateLapsed:
		c.Lapsed++
	case StateCompleted:
		c.Completed++
	case StateExpired:
		c.Expired++
	}
}

// A PageScan builds one page of List from entries offered in any order, as
// a backend that cannot read its records in List's order (a map, a Redis
// SCAN) needs: it keeps the first Limit+1 matching entries after the cursor
// in a heap, so memory stays bounded by the page size however many entries
// are offered. It is not safe for concurrent use.
type PageScan struct {
	o     ListOptions
	after Position
	limit int
	h     entryHeap
}

// NewPageScan checks o (see ListOptions.Check) and returns an empty scan.
func NewPageScan(o ListOptions) (*PageScan, error) {
	after, limit, err := o.Check()
	if err != nil {
		return nil, err
	}
	return &PageScan{o: o, after: after, limit: limit}, nil
}

// Offer considers e for the page: kept when it matches the options, comes
// after the cursor and ranks among the first Limit+1 offered so far.
func (p *PageScan) Offer(e Entry) {
	if !p.o.Match(e) || !p.after.Before(PositionOf(e)) {
		return
	}
	if len(p.h) <= p.limit {
		heap.Push(&p.h, e)
		return
	}
	if PositionOf(e).Before(PositionOf(p.h[0])) {
		p.h[0] = e
		heap.Fix(&p.h, 0)
	}
}

// Page returns the page: the first Limit entries offered, in order, and
// the cursor after the last of them when more were offered.
func (p *PageScan) Page() Page {
	out := make([]Entry, len(p.h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&p.h).(Entry)
	}
	return PageOf(out, p.limit)
}

// entryHeap is a max-heap in List's order: its root is the last entry kept.
type entryHeap []Entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return PositionOf(h[j]).Before(PositionOf(h[i])) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(Entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
