package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
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
	nonceLen   = 12    // a sealed response's GCM nonce
	ivLen      = 16    // a sealed fingerprint's synthetic IV
	respFormat = 1     // first byte of a sealed response
	fpPrefix   = "s2." // a sealed fingerprint: "s2." id "." base64url(iv || ciphertext)
)

// notKept is the response a replay of a record sealed under a deleted key
// gets: the engine's marker for "completed without its response" (package
// idem's notKeptMarker), so the engine answers a replay that is done but
// cannot be shown (httpidem: 410) and never runs the work again.
var notKept = []byte("\x00idem:response-not-kept")

// scratch is the working memory of one seal or open: reused, so that a
// fingerprint costs no allocation but its result.
type scratch struct {
	a, b    []byte
	sum     [sha256.Size]byte
	iv      [ivLen]byte
	ctr, ks [aes.BlockSize]byte
}

var scratches = sync.Pool{New: func() any { return &scratch{a: make([]byte, 0, 2048), b: make([]byte, 0, 2048)} }}

// derived holds the keys one provider key gives one scope.
type derived struct {
	id     string
	secret [SecretLen]byte
	resp   cipher.AEAD  // responses
	fp     cipher.Block // fingerprints, in CTR mode
	mac    []byte       // HMAC-SHA256 key of fingerprints
	macs   sync.Pool    // of hash.Hash: HMAC-SHA256 under mac, reused with Reset
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
	if d.fp, err = aes.NewCipher(m[32:64]); err != nil {
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
// store can still compare fingerprints. It is SIV (synthetic IV)
// encryption: the IV is the HMAC-SHA256 of key and fp, truncated to ivLen
// bytes, and the ciphertext is fp, packed (packFingerprint), in AES-256-CTR
// from that IV under a second key. One IV only ever encrypts one
// plaintext, and opening recomputes the IV from what it decrypted, which
// authenticates it. Without the keys the stored form says nothing about fp,
// so it cannot be guessed offline; with them, Get and Mismatch can return
// fp itself. An empty fp stays empty.
func (d *derived) sealFingerprint(key, fp string) string {
	if fp == "" {
		return ""
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	// sc.b: the IV, then the packed fingerprint encrypted in place.
	iv := d.fpIV(sc, key, fp)
	sc.b = append(sc.b[:0], iv...)
	sc.b = packFingerprint(sc.b, fp)
	d.ctr(sc, iv, sc.b[ivLen:])
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

// fpIV returns the first ivLen bytes of the HMAC-SHA256 of key, a NUL and
// fp (a key holds no NUL, so the NUL ends it unambiguously), in sc.iv.
func (d *derived) fpIV(sc *scratch, key, fp string) []byte {
	h := d.macs.Get().(hash.Hash)
	h.Reset()
	sc.a = append(append(append(sc.a[:0], key...), 0), fp...)
	h.Write(sc.a)
	copy(sc.iv[:], h.Sum(sc.sum[:0]))
	d.macs.Put(h)
	return sc.iv[:]
}

// ctr XORs b, in place, with the AES-256-CTR key stream of the fingerprint
// key from the counter block iv (incremented as one big-endian 128-bit
// number, as crypto/cipher's CTR does; a test checks the two agree). A
// fingerprint is a few blocks: this costs no allocation, where a
// cipher.Stream would cost one per call.
func (d *derived) ctr(sc *scratch, iv, b []byte) {
	hi, lo := binary.BigEndian.Uint64(iv), binary.BigEndian.Uint64(iv[8:])
	for len(b) > 0 {
		binary.BigEndian.PutUint64(sc.ctr[:], hi)
		binary.BigEndian.PutUint64(sc.ctr[8:], lo)
		d.fp.Encrypt(sc.ks[:], sc.ctr[:])
		n := subtle.XORBytes(b, b, sc.ks[:])
		b = b[n:]
		if lo++; lo == 0 {
			hi++
		}
	}
}

// Packed fingerprints: a form byte, then
//
//	packRaw:  the fingerprint's bytes;
//	packHex:  the length of the prefix up to the first ':' and the ':', the
//	          prefix, and the bytes of the even-length lowercase hex that
//	          is all the rest.
//
// A fingerprint of keyer's ("v1:" and 64 hex digits, 67 bytes) packs into
// 37, so that sealed it is not much longer than in clear: a longer
// fingerprint costs every claim's round trip.
const (
	packRaw = 0
	packHex = 1
)

// packFingerprint appends fp, packed, to b.
func packFingerprint(b []byte, fp string) []byte {
	i := strings.IndexByte(fp, ':') + 1
	if h := fp[i:]; i > 0 && i <= 255 && h != "" && len(h)%2 == 0 {
		b = slices.Grow(b, 2+i+len(h)/2)
		n := len(b)
		b = append(b, packHex, byte(i))
		b = append(b, fp[:i]...)
		out := b[len(b) : len(b)+len(h)/2]
		bad := byte(0)
		for j := range out {
			hi, lo := unhex[h[2*j]], unhex[h[2*j+1]]
			bad |= hi | lo
			out[j] = hi<<4 | lo&15
		}
		if bad < 16 {
			return b[:len(b)+len(out)]
		}
		b = b[:n]
	}
	return append(append(b, packRaw), fp...)
}

// unpackFingerprint returns the fingerprint b packs, and false for bytes
// packFingerprint cannot have made.
func unpackFingerprint(b []byte) (string, bool) {
	switch {
	case len(b) >= 1 && b[0] == packRaw:
		return string(b[1:]), true
	case len(b) >= 3 && b[0] == packHex && int(b[1]) >= 1 && len(b) > 2+int(b[1]):
		p := b[2 : 2+int(b[1])]
		if p[len(p)-1] != ':' {
			return "", false
		}
		var sb strings.Builder
		sb.Grow(len(p) + 2*(len(b)-len(p)-2))
		sb.Write(p)
		for _, c := range b[2+len(p):] {
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&15])
		}
		return sb.String(), true
	}
	return "", false
}

const hexDigits = "0123456789abcdef"

// unhex maps a lowercase hex digit to its value and every other byte to
// 0xff. Not encoding/hex: it also decodes upper case, and "v1:AB" packed
// that way would open as "v1:ab", another fingerprint.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < 16; i++ {
		t[hexDigits[i]] = byte(i)
	}
	return t
}()

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
	if err != nil || len(b) <= ivLen {
		return "", fmt.Errorf("fingerprint under key %q: %w", d.id, ErrCorrupt)
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	iv := b[:ivLen]
	d.ctr(sc, iv, b[ivLen:])
	fp, ok := unpackFingerprint(b[ivLen:])
	if !ok || !hmac.Equal(d.fpIV(sc, key, fp), iv) {
		return "", fmt.Errorf("fingerprint under key %q: %w", d.id, ErrCorrupt)
	}
	return fp, nil
}

// isNotFound reports whether err says the provider has no such key.
func isNotFound(err error) bool { return errors.Is(err, ErrKeyNotFound) }
