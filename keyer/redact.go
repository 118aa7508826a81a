package keyer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// A Redactor returns the form of a store key that may be written to logs,
// metrics and traces. Store keys hold what clients chose and the scope the
// server added (tenant, user), so they are kept out of telemetry unless the
// user opts into raw keys with RawKeys.
//
// A Redactor must be safe for concurrent use and must not fail; it is called
// on every logged or traced request.
type Redactor func(key string) string

// MinSecretLen is the shortest secret HashKeys accepts, in bytes.
const MinSecretLen = 16

// ErrShortSecret is matched by errors.Is on the error HashKeys returns for a
// secret shorter than MinSecretLen bytes.
var ErrShortSecret = errors.New("keyer: secret too short")

// hashPrefix starts every hashed key, so a reader of a log line can tell a
// hashed key from a raw one.
const hashPrefix = "hmac:"

// hashBytes is how many bytes of the HMAC a hashed key keeps (128 bits, 32
// hex digits): enough that two keys in one log never collide by chance.
const hashBytes = 16

// HashKeys returns a Redactor that writes each key as "hmac:" followed by 32
// hex digits of HMAC-SHA256(secret, key). The same key always gives the same
// hash under the same secret, so the lines of one request (and, when every
// process shares the secret, of its retries on other processes) can be found
// together, while the key itself cannot be read back nor guessed without the
// secret. The secret is copied. It must be at least MinSecretLen bytes;
// otherwise HashKeys returns an error matching ErrShortSecret.
func HashKeys(secret []byte) (Redactor, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("keyer: hash keys: the secret has %d bytes, at least %d are needed: %w", len(secret), MinSecretLen, ErrShortSecret)
	}
	k := append([]byte(nil), secret...)
	pool := sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}
	return func(key string) string {
		m := pool.Get().(hash.Hash)
		m.Reset()
		m.Write([]byte(key)) // a hash.Hash never returns an error
		var sum [sha256.Size]byte
		out := m.Sum(sum[:0])
		pool.Put(m)
		var buf [len(hashPrefix) + 2*hashBytes]byte
		copy(buf[:], hashPrefix)
		hex.Encode(buf[len(hashPrefix):], out[:hashBytes])
		return string(buf[:])
	}, nil
}

var (
	processOnce     sync.Once
	processRedactor Redactor
)

// DefaultRedactor returns the Redactor to use when the user chose none: a
// HashKeys with a random secret drawn once per process. Keys hash alike
// within one process and differently in every other (and after a restart);
// give every process the same HashKeys secret to correlate across them.
func DefaultRedactor() Redactor {
	processOnce.Do(func() {
		secret := make([]byte, 32)
		_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
		r, err := HashKeys(secret)
		if err != nil {
			panic(err) // unreachable: the secret has 32 bytes
		}
		processRedactor = r
	})
	return processRedactor
}

// OmitKeys returns a Redactor that writes no key at all: every key becomes
// the empty string, and telemetry that sees an empty key leaves the key
// attribute out.
func OmitKeys() Redactor { return func(string) string { return "" } }

// RawKeys returns a Redactor that writes keys as they are, tenant scope and
// client-chosen bytes included. Choose it only where logs are as protected
// as the data the keys identify.
func RawKeys() Redactor { return func(key string) string { return key } }

// Redact applies r to key, and DefaultRedactor when r is nil, so a nil
// Redactor field or option means "hash with the process key", never "raw".
func (r Redactor) Redact(key string) string {
	if r == nil {
		return DefaultRedactor()(key)
	}
	return r(key)
}
