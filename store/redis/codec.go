package redis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/idemkit/idemkit/store"
)

// The value stored under each key, version 2. All integers are big-endian.
//
//	offset  size  field
//	0       1     version, 2 (1 for values written before Attempt and Fence)
//	1       1     status: 1 in progress, 2 completed
//	2       1     token length n (1..128)
//	3       2     fingerprint length m (0..1024)
//	5       8     time in Unix milliseconds: LockedUntil while in progress,
//	              ExpiresAt once completed (for a record in progress they are
//	              the same instant)
//	13      4     Attempt
//	17      8     Fence
//	25      n     token
//	25+n    m     fingerprint
//	25+n+m  rest  response (completed only; empty while in progress)
//
// Version 1, which earlier releases wrote, is the same without Attempt and
// Fence: a 13-byte header, then the token. Such a value still decodes, with
// Attempt 0 and Fence 0, and the scripts accept it wherever they accept a
// version-2 one. A version-1 record in progress was written with PX lease
// (no LapsedKept window), so it is live exactly as long as it exists.
//
// The fixed header lets the Lua scripts find the token and the fingerprint
// with string.byte and string.sub, and lets the completion script rewrite
// the status and time in place and append the response, without decoding
// or rebuilding anything else.
// A record in progress costs 25 bytes plus its token and fingerprint.
const (
	codecVersion = 2
	codecV1      = 1

	offStatus    = 1
	offTokLen    = 2
	offFPLen     = 3
	offTime      = 5
	offAttempt   = 13
	offFence     = 17
	headerSize   = 25
	v1HeaderSize = 13

	statusInProgress = 1
	statusCompleted  = 2
)

// keptMillis is store.LapsedKept in milliseconds: a record in progress is
// written with PX lease+keptMillis, so its lease is live while its PTTL is
// above keptMillis, and Redis deletes it LapsedKept after the lease.
const keptMillis = int64(store.LapsedKept / time.Millisecond)

// errCorrupt is wrapped by every decoding error.
var errCorrupt = errors.New("not an idemkit record")

// encode returns the stored value for a record. The caller has validated
// token and fingerprint with the store package's checks.
func encode(status byte, token store.Token, fingerprint string, at int64, attempt uint32, fence uint64, response []byte) string {
	b := appendRecord(make([]byte, 0, headerSize+len(token)+len(fingerprint)+len(response)), status, token, fingerprint, at, attempt, fence, response)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendRecord appends the stored value for a record to b.
func appendRecord(b []byte, status byte, token store.Token, fingerprint string, at int64, attempt uint32, fence uint64, response []byte) []byte {
	b = append(b, codecVersion, status, byte(len(token)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(fingerprint)))
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, attempt)
	b = binary.BigEndian.AppendUint64(b, fence)
	b = append(b, token...)
	b = append(b, fingerprint...)
	return append(b, response...)
}

// encodeTime returns the 8 bytes of the time field, as the completion script
// splices them in.
func encodeTime(at int64) string {
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(at))
	return string(t[:])
}

// decode parses a stored value into the record for key. It rejects anything
// encode could not have produced with an error wrapping errCorrupt, and never
// panics. The returned Response is a fresh copy.
func decode(key, v string) (store.Record, error) { return decodeValue(key, v, false) }

// decodeReply is decode for a value go-redis has just read off the
// connection, without copying the response a second time: the Response
// shares v's bytes. That is safe because go-redis reads every bulk reply
// into a buffer of its own (proto.Reader.readStringReply: make, then an
// unsafe string view), which nothing else holds once the command is
// dropped; the caller owns Response as it would own a copy, and writing
// to it changes neither the Token nor the Fingerprint, which lie before it
// in v.
func decodeReply(key, v string) (store.Record, error) { return decodeValue(key, v, true) }

// headerLen returns the header size of a value of version ver, or 0 for
// an unknown version.
func headerLen(ver byte) int {
	switch ver {
	case codecVersion:
		return headerSize
	case codecV1:
		return v1HeaderSize
	}
	return 0
}

func decodeValue(key, v string, alias bool) (store.Record, error) {
	if len(v) == 0 {
		return store.Record{}, fmt.Errorf("%w: empty value", errCorrupt)
	}
	h := headerLen(v[0])
	if h == 0 {
		return store.Record{}, fmt.Errorf("%w: unknown version %d", errCorrupt, v[0])
	}
	if len(v) < h {
		return store.Record{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", errCorrupt, len(v), h)
	}
	n := int(v[offTokLen])
	m := int(v[offFPLen])<<8 | int(v[offFPLen+1])
	var at int64
	for i := offTime; i < offTime+8; i++ {
		at = at<<8 | int64(v[i])
	}
	switch {
	case n == 0 || n > store.MaxTokenLen:
		return store.Record{}, fmt.Errorf("%w: token length %d out of range", errCorrupt, n)
	case m > store.MaxFingerprintLen:
		return store.Record{}, fmt.Errorf("%w: fingerprint length %d out of range", errCorrupt, m)
	case len(v) < h+n+m:
		return store.Record{}, fmt.Errorf("%w: %d bytes, too short for a %d-byte token and a %d-byte fingerprint", errCorrupt, len(v), n, m)
	}
	token := v[h : h+n]
	fp := v[h+n : h+n+m]
	if !validText(token) || !validText(fp) {
		return store.Record{}, fmt.Errorf("%w: token or fingerprint is not NUL-free UTF-8", errCorrupt)
	}
	rec := store.Record{
		Key:         key,
		Fingerprint: fp,
		Token:       store.Token(token),
		ExpiresAt:   time.UnixMilli(at),
	}
	if h == headerSize {
		rec.Attempt = uint32(bigEndian(v[offAttempt:offFence]))
		rec.Fence = bigEndian(v[offFence:headerSize])
	}
	rest := v[h+n+m:]
	switch v[offStatus] {
	case statusInProgress:
		if rest != "" {
			return store.Record{}, fmt.Errorf("%w: a record in progress carries %d response bytes", errCorrupt, len(rest))
		}
		rec.Status = store.StatusInProgress
		rec.LockedUntil = rec.ExpiresAt
	case statusCompleted:
		rec.Status = store.StatusCompleted
		if alias {
			rec.Response = unsafe.Slice(unsafe.StringData(rest), len(rest))
			if rec.Response == nil {
				rec.Response = []byte{} // completed: never nil
			}
		} else {
			rec.Response = []byte(rest)
		}
	default:
		return store.Record{}, fmt.Errorf("%w: unknown status %d", errCorrupt, v[offStatus])
	}
	return rec, nil
}

// bigEndian reads the big-endian unsigned integer of up to 8 bytes b.
func bigEndian(b string) uint64 {
	var n uint64
	for i := 0; i < len(b); i++ {
		n = n<<8 | uint64(b[i])
	}
	return n
}

func validText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
