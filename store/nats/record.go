package nats

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Headers on every record message. lifeHeader holds the lease (in progress)
// or the retention (completed) in nanoseconds: the record's deadline is the
// message's server timestamp plus this. Purge reads it from the headers
// alone, without the response bytes.
const (
	lifeHeader = "Idemkit-Life"
	kvOpHeader = "KV-Operation" // "DEL" or "PURGE" on a marker, as the nats.go KV writes them
	ttlHeader  = "Nats-TTL"     // per-message TTL, NATS 2.11 and later
)

const recordVersion = 1

// record is one decoded bucket entry.
type record struct {
	status      store.Status
	fingerprint string
	token       store.Token
	response    []byte
	life        time.Duration
}

// encodeRecord lays out a record's value: version, status, the
// fingerprint and the token each behind their length, then the response.
func encodeRecord(st store.Status, fingerprint string, token store.Token, response []byte) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(fingerprint)+len(token)+len(response))
	b = append(b, recordVersion, byte(st))
	b = binary.AppendUvarint(b, uint64(len(fingerprint)))
	b = append(b, fingerprint...)
	b = binary.AppendUvarint(b, uint64(len(token)))
	b = append(b, token...)
	return append(b, response...)
}

// recordOverhead is how many bytes encodeRecord adds to a response at most,
// for the size check before a Complete writes anything.
func recordOverhead(fingerprint string, token store.Token) int {
	return 2 + 2*binary.MaxVarintLen64 + len(fingerprint) + len(token)
}

var errCorrupt = errors.New("malformed record")

func decodeRecord(b []byte, life string) (record, error) {
	var r record
	if len(b) < 2 || b[0] != recordVersion {
		return r, errCorrupt
	}
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
