package nats

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Headers on every record message. lifeHeader holds the lease (in progress)
// or the retention (completed) in nanoseconds: the record's deadline is the
// message's server timestamp plus this. keptHeader holds how long the
// record is kept past that deadline, in nanoseconds (store.LapsedKept for a
// record in progress, 0 for a completed one), so that Purge tells a lapsed
// lease it must keep from a record it may delete from the headers alone,
// without the response bytes; records written before version 2 lack it.
const (
	lifeHeader = "Idemkit-Life"
	keptHeader = "Idemkit-Kept"
	kvOpHeader = "KV-Operation" // "DEL" or "PURGE" on a marker, as the nats.go KV writes them
	ttlHeader  = "Nats-TTL"     // per-message TTL, NATS 2.11 and later
)

// Record layouts. Version 1 records (before Attempt and Fence) still read,
// with Attempt 0 and Fence 0; every write makes a version 2 record.
const (
	recordV1      = 1
	recordVersion = 2
)

// record is one decoded bucket entry.
type record struct {
	status      store.Status
	fingerprint string
	token       store.Token
	response    []byte
	life        time.Duration
	attempt     uint32
	fence       uint64
}

// encode lays out r's value (its life goes in a header): version,
// status, the fingerprint and the token each behind their length, the
// attempt and the fence, then the response.
func (r record) encode() []byte {
	b := make([]byte, 0, recordOverhead(r.fingerprint, r.token)+len(r.response))
	b = append(b, recordVersion, byte(r.status))
	b = binary.AppendUvarint(b, uint64(len(r.fingerprint)))
	b = append(b, r.fingerprint...)
	b = binary.AppendUvarint(b, uint64(len(r.token)))
	b = append(b, r.token...)
	b = binary.AppendUvarint(b, uint64(r.attempt))
	b = binary.AppendUvarint(b, r.fence)
	return append(b, r.response...)
}

// recordOverhead is how many bytes encode adds to a response at most,
// for the size check before a Complete writes anything.
func recordOverhead(fingerprint string, token store.Token) int {
	return 2 + 4*binary.MaxVarintLen64 + len(fingerprint) + len(token)
}

var errCorrupt = errors.New("malformed record")

// decodeRecord reads a record of either version; life is its lifeHeader.
func decodeRecord(b []byte, life string) (record, error) {
	var r record
	if len(b) < 2 || (b[0] != recordV1 && b[0] != recordVersion) {
		return r, errCorrupt
	}
	version := b[0]
	r.status = store.Status(b[1])
	if r.status != store.StatusInProgress && r.status != store.StatusCompleted {
		return r, errCorrupt
	}
	b = b[2:]
	var fields [2][]byte
	for i := range fields {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return r, errCorrupt
		}
		fields[i] = b[w : w+int(n)]
		b = b[w+int(n):]
	}
	r.fingerprint = string(fields[0])
	r.token = store.Token(fields[1])
	if version >= 2 {
		attempt, w := binary.Uvarint(b)
		if w <= 0 || attempt > math.MaxUint32 {
			return r, errCorrupt
		}
		b = b[w:]
		fence, w := binary.Uvarint(b)
		if w <= 0 {
			return r, errCorrupt
		}
		b = b[w:]
		r.attempt, r.fence = uint32(attempt), fence
	}
	if r.status == store.StatusCompleted {
		r.response = append([]byte{}, b...)
	}
	ns, err := strconv.ParseInt(life, 10, 64)
	if err != nil || ns <= 0 {
		return r, errCorrupt
	}
	r.life = time.Duration(ns)
	return r, nil
}

// kept is how long the servers and Purge keep r past its deadline:
// store.LapsedKept for a lease (so a takeover counts the attempt), nothing
// for a completed record.
func (r record) kept() time.Duration {
	if r.status == store.StatusInProgress {
		return store.LapsedKept
	}
	return 0
}

// toRecord returns the store.Record for r, written at the server time stamp.
func (r record) toRecord(key string, stamp time.Time) store.Record {
	deadline := stamp.Add(r.life)
	rec := store.Record{
		Key:         key,
		Fingerprint: r.fingerprint,
		Status:      r.status,
		Token:       r.token,
		Response:    r.response,
		ExpiresAt:   deadline,
		Attempt:     r.attempt,
		Fence:       r.fence,
	}
	if r.status == store.StatusInProgress {
		rec.LockedUntil = deadline
	}
	return rec
}

// keyToken is the NATS key for an idempotency key: its bytes in unpadded
// base64url, whose alphabet is within the characters NATS allows in a key
// and has no dot, so no idempotency key can reach the store's own entries
// (whose names have a dot) and every key is one subject token.
func keyToken(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// keyOf inverts keyToken; ok is false for an entry that is not a record.
func keyOf(token string) (string, bool) {
	if strings.IndexByte(token, '.') >= 0 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

// ttlFor is the per-message TTL for a record that lives d: d rounded up to a
// whole second, plus a second, so the server never removes a record before
// its deadline (the deadline decides; the TTL only collects the garbage).
func ttlFor(d time.Duration) time.Duration {
	return (d+time.Second-1)/time.Second*time.Second + time.Second
}
