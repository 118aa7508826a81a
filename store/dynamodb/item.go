package dynamodb

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// Attribute names of an item. They are short because every item stores
// them; expressions always refer to them through ExpressionAttributeNames
// (#k, #t, ...), since TTL is a reserved word.
const (
	attrKey         = "k"   // S, the partition key: the key as the caller passed it
	attrFingerprint = "f"   // S, absent when the fingerprint is empty
	attrToken       = "t"   // S
	attrStatus      = "s"   // N: 1 in progress, 2 completed
	attrLockedUntil = "l"   // N, Unix nanoseconds: end of the lease (in progress only)
	attrExpiresAt   = "e"   // N, Unix nanoseconds: when the record becomes absent
	attrResponse    = "r"   // B, completed only; absent when the response is empty
	attrTTL         = "ttl" // N, Unix seconds: when DynamoDB's TTL may delete the item
	attrAttempt     = "a"   // N, Record.Attempt; absent on items written before it (read as 0)
	attrFence       = "n"   // N, Record.Fence; absent on items written before it (read as 0)
)

// TTLAttribute is the attribute Migrate enables DynamoDB's Time to Live on.
// Each item holds there, in Unix seconds, a time one hour after the item's
// own deadline (which includes the clock skew allowance), so AWS's deletion
// (on AWS's clock, some time after that) only removes items that every
// Store already treats as absent. For a record in progress that deadline
// is the end of the lease plus store.LapsedKept: a lapsed lease is kept
// that long, absent to Claim and Get, so that the claim that takes it over
// counts one attempt more.
const TTLAttribute = attrTTL

// ttlGrace is how far past the end of its record an item's TTL lies.
const ttlGrace = time.Hour

var names = map[string]string{
	"#k": attrKey, "#f": attrFingerprint, "#t": attrToken, "#s": attrStatus,
	"#l": attrLockedUntil, "#e": attrExpiresAt, "#r": attrResponse, "#ttl": attrTTL,
	"#a": attrAttempt, "#n": attrFence,
}

// namesFor returns the subset of names an expression uses.
func namesFor(keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = names[k]
	}
	return m
}

const (
	statusInProgress = "1"
	statusCompleted  = "2"
)

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func attrN(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
func attrB(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }
func attrTime(t time.Time) types.AttributeValue {
	return attrN(strconv.FormatInt(t.UnixNano(), 10))
}

func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: attrS(key)}
}

// ttlOf returns the TTL attribute for a record that ends at end (for a
// lease: the end of the lease plus store.LapsedKept, see leaseTTL).
func (s *Store) ttlOf(end time.Time) types.AttributeValue {
	t := end.Add(ttlGrace)
	return attrN(strconv.FormatInt(t.Unix()+1, 10))
}

// leaseTTL returns the TTL attribute for a lease that lapses at until: the
// item stays store.LapsedKept past it, for the attempt count.
func (s *Store) leaseTTL(until time.Time) types.AttributeValue {
	return s.ttlOf(until.Add(store.LapsedKept))
}

func attrUint(v uint64) types.AttributeValue { return attrN(strconv.FormatUint(v, 10)) }

// decode turns an item into a record. A nil item decodes to ok == false.
func decode(item map[string]types.AttributeValue) (r store.Record, ok bool, err error) {
	if len(item) == 0 {
		return store.Record{}, false, nil
	}
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	num := func(name string) (string, error) {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return "", fmt.Errorf("item has no number attribute %q", name)
		}
		return v.Value, nil
	}
	when := func(name string) (time.Time, error) {
		v, err := num(name)
		if err != nil {
			return time.Time{}, err
		}
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("attribute %q = %q: %w", name, v, err)
		}
		return time.Unix(0, ns), nil
	}
	r.Key, r.Fingerprint, r.Token = str(attrKey), str(attrFingerprint), store.Token(str(attrToken))
	// Attempt and fence: absent on items written before them (0).
	for name, bits := range map[string]int{attrAttempt: 32, attrFence: 64} {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v.Value, 10, bits)
		if err != nil {
			return r, false, fmt.Errorf("attribute %q = %q: %w", name, v.Value, err)
		}
		if name == attrAttempt {
			r.Attempt = uint32(n)
		} else {
			r.Fence = n
		}
	}
	status, err := num(attrStatus)
	if err != nil {
		return r, false, err
	}
	if r.ExpiresAt, err = when(attrExpiresAt); err != nil {
		return r, false, err
	}
	switch status {
	case statusInProgress:
		r.Status = store.StatusInProgress
		if r.LockedUntil, err = when(attrLockedUntil); err != nil {
			return r, false, err
		}
	case statusCompleted:
		r.Status = store.StatusCompleted
		r.Response = []byte{}
		if v, ok := item[attrResponse].(*types.AttributeValueMemberB); ok {
			r.Response = v.Value
		}
	default:
		return r, false, fmt.Errorf("item has status %q, want 1 or 2", status)
	}
	return r, true, nil
}

// live reports whether r is still a record at now: its deadline, which
// includes the skew allowance, is later. It is the test the conditions of
// Claim and Purge make on the server.
func (s *Store) live(r store.Record, now time.Time) bool {
	return r.ExpiresAt.After(now)
}

// deadline returns the end of a lease or retention d that begins at now:
// d plus the skew allowance later, at the resolution items keep.
func (s *Store) deadline(now time.Time, d time.Duration) time.Time {
	return time.Unix(0, now.Add(d+s.skew).UnixNano())
}
