package seal

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idemkit/store"
)

// SecretLen is the length of every key's secret: 32 bytes, an AES-256 key's
// worth of entropy.
const SecretLen = 32

// MaxKeyIDLen is the longest key id, in bytes.
const MaxKeyIDLen = 64

// ErrKeyNotFound is what a KeyProvider returns (wrapped or not) when it has
// no key for a scope, or none with the id asked for: never created, or
// deleted. Records sealed under a deleted key are unreadable: their
// responses replay as "kept without response".
var ErrKeyNotFound = errors.New("seal: key not found")

// ErrCorrupt is matched by the error of a call that met sealed data that
// does not authenticate: a response or fingerprint changed in the store, or
// the provider's key under that id is not the key that sealed it.
var ErrCorrupt = errors.New("seal: sealed data failed authentication (changed in the store, or not the key that sealed it)")

// Key is one key of a scope: an id, stored beside everything sealed under
// it, and the secret the scope's data keys are derived from.
type Key struct {
	// ID names the key: 1 to MaxKeyIDLen bytes of ASCII letters, digits,
	// '.', '_' and '-'. A scope's ids must be distinct for as long as
	// records sealed under them are kept.
	ID string
	// Secret is SecretLen bytes. Callers must not modify it.
	Secret []byte
}

// A KeyProvider holds the keys that seal records, per scope (a tenant),
// with one current key per scope and older ones kept by id so records sealed
// before a rotation still open. It is small so that a KMS can back it: a
// provider that keeps each scope's secrets encrypted under a KMS key
// unwraps them there (and caches them) in CurrentKey and Key.
//
// Methods must be safe for concurrent use; they are called on every store
// call, so a provider that asks a remote service caches its answers.
type KeyProvider interface {
	// CurrentKey returns the key new records of scope are sealed with, or
	// an error matching ErrKeyNotFound when scope has none.
	CurrentKey(ctx context.Context, scope string) (Key, error)
	// Key returns scope's key with id, or an error matching ErrKeyNotFound
	// when there is none (never created, or deleted to shred the records
	// sealed under it).
	Key(ctx context.Context, scope, id string) (Key, error)
}

// LocalKeys is a KeyProvider that keeps its keys in process memory: for
// tests, and for programs that load their keys from a file or a secret
// manager at start (LoadKeyFile). It is safe for concurrent use.
//
// Reads take no lock: the keys are an immutable snapshot that Add and
// Delete replace (under a lock, copying the scope they change), so that
// CurrentKey and Key, called on every store call, never contend.
type LocalKeys struct {
	mu     sync.Mutex                            // serialises Add and Delete
	scopes atomic.Pointer[map[string]*scopeKeys] // never nil after NewLocalKeys; read-only once stored
}

// scopeKeys is one scope's keys; read-only once in a snapshot.
type scopeKeys struct {
	current string
	keys    map[string][]byte
}

var _ KeyProvider = (*LocalKeys)(nil)

// NewLocalKeys returns a LocalKeys without keys.
func NewLocalKeys() *LocalKeys {
	k := &LocalKeys{}
	k.scopes.Store(&map[string]*scopeKeys{})
	return k
}

// NewSecret returns SecretLen bytes from crypto/rand, a fresh key secret.
func NewSecret() []byte {
	b := make([]byte, SecretLen)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read panics rather than return an error)
	return b
}

// snapshot returns the keys of every scope (nil for a zero LocalKeys).
func (k *LocalKeys) snapshot() map[string]*scopeKeys {
	if m := k.scopes.Load(); m != nil {
		return *m
	}
	return nil
}

// update replaces scope's keys with what change makes of a copy of them,
// in a new snapshot. The caller holds k.mu.
func (k *LocalKeys) update(scope string, change func(sk *scopeKeys) error) error {
	old := k.snapshot()
	sk := &scopeKeys{keys: map[string][]byte{}}
	if o := old[scope]; o != nil {
		sk.current = o.current
		maps.Copy(sk.keys, o.keys)
	}
	if err := change(sk); err != nil {
		return err
	}
	next := make(map[string]*scopeKeys, len(old)+1)
	maps.Copy(next, old)
	next[scope] = sk
	k.scopes.Store(&next)
	return nil
}

// Add adds the key id with secret to scope and makes it the scope's current
// key (a rotation, when the scope had one: its older keys stay, so records
// sealed under them still open). Adding an id again with the same secret
// only makes it current again. An invalid id, a secret of the wrong length,
// or an id the scope already has with another secret is an error matching
// store.ErrInvalid.
func (k *LocalKeys) Add(scope, id string, secret []byte) error {
	if err := checkKeyID(id); err != nil {
		return fmt.Errorf("seal: add key: %w", err)
	}
	if len(secret) != SecretLen {
		return fmt.Errorf("seal: add key %q: %w: secret is %d bytes, want %d", id, store.ErrInvalid, len(secret), SecretLen)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.update(scope, func(sk *scopeKeys) error {
		if old, ok := sk.keys[id]; ok && string(old) != string(secret) {
			return fmt.Errorf("seal: add key %q: %w: the scope already has a key with this id and another secret; ids must not be reused", id, store.ErrInvalid)
		}
		sk.keys[id] = append([]byte(nil), secret...)
		sk.current = id
		return nil
	})
}

// Delete deletes scope's key id. Records sealed under it can no longer be
// read (crypto-shredding): their responses replay as "kept without
// response". When it was the current key, the scope has no current key
// until Add gives it one, and new records of the scope cannot be sealed.
func (k *LocalKeys) Delete(scope, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.snapshot()[scope] == nil {
		return
	}
	_ = k.update(scope, func(sk *scopeKeys) error {
		delete(sk.keys, id)
		if sk.current == id {
			sk.current = ""
		}
		return nil
	})
}

// CurrentKey implements KeyProvider.
func (k *LocalKeys) CurrentKey(_ context.Context, scope string) (Key, error) {
	if sk := k.snapshot()[scope]; sk != nil && sk.current != "" {
		return Key{ID: sk.current, Secret: sk.keys[sk.current]}, nil
	}
	return Key{}, fmt.Errorf("%w: no current key for the scope", ErrKeyNotFound)
}

// Key implements KeyProvider.
func (k *LocalKeys) Key(_ context.Context, scope, id string) (Key, error) {
	if sk := k.snapshot()[scope]; sk != nil {
		if s, ok := sk.keys[id]; ok {
			return Key{ID: id, Secret: s}, nil
		}
	}
	return Key{}, fmt.Errorf("%w: no key %q for the scope", ErrKeyNotFound, id)
}

// ParseKeys reads keys in the key file format into a new LocalKeys. Each
// line that is not blank or a comment (#) is
//
//	[scope] id secret
//
// where secret is the standard base64 of SecretLen bytes and a line without
// a scope is for the default scope "". Lines are added in order, so the last
// key of a scope is its current key, and deleting a key's line (and
// restarting) shreds the records sealed under it. Errors name the line,
// never its secret.
func ParseKeys(r io.Reader) (*LocalKeys, error) {
	k := NewLocalKeys()
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		var scope string
		switch len(f) {
		case 2:
		case 3:
			scope, f = f[0], f[1:]
		default:
			return nil, fmt.Errorf("seal: keys: line %d: %w: want [scope] id secret, found %d fields", n, store.ErrInvalid, len(f))
		}
		secret, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("seal: keys: line %d: %w: the secret is not standard base64", n, store.ErrInvalid)
		}
		if err := k.Add(scope, f[0], secret); err != nil {
			return nil, fmt.Errorf("seal: keys: line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("seal: keys: %w", err)
	}
	return k, nil
}

// LoadKeyFile reads the key file at path (see ParseKeys). The file holds
// secrets: keep it readable by the service's user only.
func LoadKeyFile(path string) (*LocalKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("seal: keys: %w", err)
	}
	defer f.Close()
	return ParseKeys(f)
}

// FormatKey returns the key file line for a key of scope ("" for the
// default scope, written without one).
func FormatKey(scope string, k Key) string {
	line := k.ID + " " + base64.StdEncoding.EncodeToString(k.Secret)
	if scope != "" {
		line = scope + " " + line
	}
	return line
}

func checkKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("%w: key id is %d bytes, want 1 to %d", store.ErrInvalid, len(id), MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: key id %q has a byte other than letters, digits, '.', '_' and '-'", store.ErrInvalid, id)
		}
	}
	return nil
}
