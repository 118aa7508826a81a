package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// MaxFingerprintLen is the longest fingerprint a sealed store accepts, in
// bytes: sealed, it must still fit store.MaxFingerprintLen. Fingerprints
// idemkit computes (keyer's "v1:" and 64 hex digits) are far shorter.
const MaxFingerprintLen = 512

const (
	nonceLen   = 12
	respFormat = 1     // first byte of a sealed response
	fpPrefix   = "s1." // a sealed fingerprint: "s1." id "." base64url(nonce || ciphertext)
)

// notKept is the response a replay of a record sealed under a deleted key
// gets: the engine's marker for "completed without its response" (package
// idem's notKeptMarker), so the engine answers a replay that is done but
// cannot be shown (httpidem: 410) and never runs the work again.
var notKept = []byte("\x00idem:response-not-kept")

// scratch is the working memory of one seal or open: reused, so that a
// fingerprint costs no allocation but its result.
type scratch struct {
	a, b  []byte
	sum   [sha256.Size]byte
	nonce [nonceLen]byte
}

var scratches = sync.Pool{New: func() any { return &scratch{a: make([]byte, 0, 2048), b: make([]byte, 0, 2048)} }}

// derived holds the keys one provider key gives one scope.
type derived struct {
	id     string
	secret [SecretLen]byte
	resp   cipher.AEAD // responses
	fp     cipher.AEAD // fingerprints
	mac    []byte      // HMAC-SHA256 key of fingerprints
	macs   sync.Pool   // of hash.Hash: HMAC-SHA256 under mac, reused with Reset
}

type derivedID struct{ scope, id string }

// keyring derives, and remembers, the keys of the provider's keys. It
// asks the provider on every call, so a deleted key is seen at once, and
// derives again only when a secret changes.
type keyring struct {
	p  KeyProvider
	mu sync.Mutex                             // serialises writers of m
	m  atomic.Pointer[map[derivedID]*derived] // copied on write: readers take no lock
}

// maxDerived bounds the keyring; when it is full it starts again.
const maxDerived = 4096

func (kr *keyring) current(ctx context.Context, scope string) (*derived, error) {
	k, err := kr.p.CurrentKey(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("current key: %w", err)
	}
	return kr.derive(scope, k)
}

func (kr *keyring) byID(ctx context.Context, scope, id string) (*derived, error) {
	k, err := kr.p.Key(ctx, scope, id)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", id, err)
	}
	if k.ID != id {
		return nil, fmt.Errorf("key %q: the provider returned key %q", id, k.ID)
	}
	return kr.derive(scope, k)
}

func (kr *keyring) derive(scope string, k Key) (*derived, error) {
	// A key found derived was checked when it was derived: its id is the
	// map's, its secret compared with the one it was derived from.
	if len(k.Secret) == SecretLen {
		if m := kr.m.Load(); m != nil {
			if d := (*m)[derivedID{scope, k.ID}]; d != nil && sameSecret(&d.secret, k.Secret) {
				return d, nil
			}
		}
	}
	if checkKeyID(k.ID) != nil {
		return nil, fmt.Errorf("the provider's key id %q is not 1 to %d bytes of letters, digits, '.', '_' and '-'", k.ID, MaxKeyIDLen)
	}
	if len(k.Secret) != SecretLen {
		return nil, fmt.Errorf("the provider's key %q: secret is %d bytes, want %d", k.ID, len(k.Secret), SecretLen)
	}
	// Three keys, bound to the scope: the scope's length first makes the
	// info unambiguous.
	info := "idemkit/seal/v1 " + strconv.Itoa(len(scope)) + ":" + scope
	m, err := hkdf.Key(sha256.New, k.Secret, []byte("idemkit/seal"), info, 3*32)
	if err != nil {
		return nil, err
	}
	d := &derived{id: k.ID, mac: m[64:]}
	d.macs.New = func() any { return hmac.New(sha256.New, d.mac) }
	copy(d.secret[:], k.Secret)
	if d.resp, err = newGCM(m[:32]); err != nil {
		return nil, err
	}
	if d.fp, err = newGCM(m[32:64]); err != nil {
		return nil, err
	}
	kr.mu.Lock()
	next := map[derivedID]*derived{}
	if old := kr.m.Load(); old != nil && len(*old) < maxDerived {
		maps.Copy(next, *old)
	}
	next[derivedID{scope, k.ID}] = d
	kr.m.Store(&next)
	kr.mu.Unlock()
	return d, nil
}

// sameSecret reports whether b (SecretLen bytes) is a, in constant time:
// word by word, with no early exit (subtle.ConstantTimeCompare goes byte by
// byte, and this runs on every store call).
func sameSecret(a *[SecretLen]byte, b []byte) bool {
	var x uint64
	for i := 0; i < SecretLen; i += 8 {
		x |= binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:])
	}
	return x == 0
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// sealResponse returns resp sealed for key: the format byte, the key id's
// length and the id, a random nonce, and the AES-256-GCM ciphertext with
// the store key as associated data (so it opens under no other key).
func (d *derived) sealResponse(key string, resp []byte) []byte {
	out := make([]byte, 0, 2+len(d.id)+nonceLen+len(resp)+d.resp.Overhead())
	out = append(out, respFormat, byte(len(d.id)))
	out = append(out, d.id...)
	nonce := out[len(out) : len(out)+nonceLen]
	_, _ = rand.Read(nonce)
	out = out[:len(out)+nonceLen]
	sc := scratches.Get().(*scratch)
	sc.a = append(sc.a[:0], key...)
	out = d.resp.Seal(out, nonce, resp, sc.a)
	scratches.Put(sc)
	return out
}

// responseKeyID returns the id of the key that sealed b, as a part of b:
// compared with string(id) it costs no allocation.
func responseKeyID(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != respFormat || len(b) < 2+int(b[1])+nonceLen {
		return nil, fmt.Errorf("%w: the stored response is not a sealed response", ErrCorrupt)
	}
	return b[2 : 2+int(b[1])], nil
}

// openResponse opens b, a sealed response the caller owns (a store returns
// its records' responses as copies), in place: the result shares b's
// memory, and b is garbage afterwards, opened or not.
func (d *derived) openResponse(key string, b []byte) ([]byte, error) {
	body := b[2+len(d.id):]
	sc := scratches.Get().(*scratch)
	sc.a = append(sc.a[:0], key...)
	ct := body[nonceLen:]
	out, err := d.resp.Open(ct[:0], body[:nonceLen], ct, sc.a)
	scratches.Put(sc)
	if err != nil {
		return nil, fmt.Errorf("response under key %q: %w", d.id, ErrCorrupt)
	}
	return out, nil
}

// sealFingerprint returns fp sealed for key, deterministically, so that the
// store can still compare fingerprints: the nonce is the HMAC of key and fp
// (a synthetic IV: one nonce only ever seals one plaintext), and the
// ciphertext lets Get and Mismatch return the fingerprint itself. Without
// the key, the stored form says nothing about fp, so it cannot be guessed
// offline. An empty fp stays empty.
func (d *derived) sealFingerprint(key, fp string) string {
	if fp == "" {
		return ""
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	nonce := d.fpNonce(sc, key, fp)
	// sc.a: the store key (associated data), then the fingerprint.
	sc.a = append(append(sc.a[:0], key...), fp...)
	sc.b = append(sc.b[:0], nonce...)
	sc.b = d.fp.Seal(sc.b, nonce, sc.a[len(key):], sc.a[:len(key)])
	var sb strings.Builder
	sb.Grow(len(fpPrefix) + len(d.id) + 1 + base64.RawURLEncoding.EncodedLen(len(sc.b)))
	sb.WriteString(fpPrefix)
	sb.WriteString(d.id)
	sb.WriteByte('.')
	n := len(sc.b)
	sc.b = base64.RawURLEncoding.AppendEncode(sc.b, sc.b)
	sb.Write(sc.b[n:])
	return sb.String()
}

// fpNonce returns the first nonceLen bytes of the HMAC-SHA256 of key, a
// NUL and fp (a key holds no NUL, so the NUL ends it unambiguously), in
// sc.nonce: the nonce is passed to the AEAD, an interface, so a nonce of
// its own would escape to the heap.
func (d *derived) fpNonce(sc *scratch, key, fp string) []byte {
	h := d.macs.Get().(hash.Hash)
	h.Reset()
	sc.a = append(append(append(sc.a[:0], key...), 0), fp...)
	h.Write(sc.a)
	copy(sc.nonce[:], h.Sum(sc.sum[:0]))
	d.macs.Put(h)
	return sc.nonce[:]
}

// fingerprintKeyID returns the key id of a sealed fingerprint, and false
// for a string that is not one.
func fingerprintKeyID(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, fpPrefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".")
	return id, ok && id != ""
}

func (d *derived) openFingerprint(key, s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s[len(fpPrefix)+len(d.id)+1:])
	if err != nil || len(b) < nonceLen {
		return "", fmt.Errorf("fingerprint under key %q: %w", d.id, ErrCorrupt)
	}
	fp, err := d.fp.Open(nil, b[:nonceLen], b[nonceLen:], []byte(key))
	if err != nil {
		return "", fmt.Errorf("fingerprint under key %q: %w", d.id, ErrCorrupt)
	}
	sc := scratches.Get().(*scratch)
	ok := hmac.Equal(d.fpNonce(sc, key, string(fp)), b[:nonceLen])
	scratches.Put(sc)
	if !ok {
		return "", fmt.Errorf("fingerprint under key %q: %w", d.id, ErrCorrupt)
	}
	return string(fp), nil
}

// isNotFound reports whether err says the provider has no such key.
func isNotFound(err error) bool { return errors.Is(err, ErrKeyNotFound) }
