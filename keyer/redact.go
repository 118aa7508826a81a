package keyer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
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

// DefaultKeyAttrs are the attribute names RedactHandler redacts when given
// none: the names idemkit's packages log store keys under.
var DefaultKeyAttrs = []string{"key"}

// RedactHandler returns a slog.Handler that writes every string attribute
// named in names (DefaultKeyAttrs when none are given), at any depth of
// groups, through r (DefaultRedactor when r is nil), and passes the record on
// to h. Wrap the logger given to idemkit with it, or any logger whose lines
// may carry keys:
//
//	logger := slog.New(keyer.RedactHandler(slog.Default().Handler(), nil))
//
// Attributes of other kinds (a slog.LogValuer included, resolved first) are
// redacted when they resolve to a string; others pass unchanged. A value
// already hashed (IsHashed), as idemkit's packages log keys by default,
// passes unchanged: wrapping their logger does not hash keys twice.
func RedactHandler(h slog.Handler, r Redactor, names ...string) slog.Handler {
	if len(names) == 0 {
		names = DefaultKeyAttrs
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	if r == nil {
		r = DefaultRedactor()
	}
	return &redactHandler{h: h, r: r, names: set}
}

type redactHandler struct {
	h     slog.Handler
	r     Redactor
	names map[string]bool
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(red), r: h.r, names: h.names}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), r: h.r, names: h.names}
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch {
	case a.Value.Kind() == slog.KindGroup:
		g := a.Value.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = h.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case h.names[a.Key] && a.Value.Kind() == slog.KindString && !IsHashed(a.Value.String()):
		return slog.String(a.Key, h.r(a.Value.String()))
	}
	return a
}

// IsHashed reports whether v has the form HashKeys writes: "hmac:" and 32
// lowercase hex digits. RedactHandler passes such values unchanged, since
// idemkit's own packages already log keys that way (WithKeyRedactor), so a
// logger wrapped with it does not hash them a second time. A scoped key (see
// ScopedKey) never has this form.
func IsHashed(v string) bool {
	h, ok := strings.CutPrefix(v, hashPrefix)
	if !ok || len(h) != 2*hashBytes {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
