package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"strings"
	"testing"
)

func testDerived(t testing.TB) *derived {
	t.Helper()
	kr := &keyring{}
	d, err := kr.derive("tenant", Key{ID: "k1", Secret: NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCTRIsCryptoCipher: the fingerprint's hand-rolled counter loop is
// crypto/cipher's CTR, for every length and for IVs whose low half wraps.
func TestCTRIsCryptoCipher(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	d := &derived{}
	var err error
	if d.fp, err = aes.NewCipher(key); err != nil {
		t.Fatal(err)
	}
	ivs := [][]byte{make([]byte, ivLen), bytes.Repeat([]byte{0xff}, ivLen), append(make([]byte, 8), bytes.Repeat([]byte{0xff}, 8)...)}
	for range 20 {
		iv := make([]byte, ivLen)
		_, _ = rand.Read(iv)
		ivs = append(ivs, iv)
	}
	sc := &scratch{}
	for _, iv := range ivs {
		for n := 0; n <= 100; n++ {
			pt := make([]byte, n)
			_, _ = rand.Read(pt)
			want := make([]byte, n)
			cipher.NewCTR(d.fp, iv).XORKeyStream(want, pt)
			got := append([]byte(nil), pt...)
			d.ctr(sc, iv, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("iv %x, %d bytes: ctr = %x, crypto/cipher's CTR = %x", iv, n, got, want)
			}
		}
	}
}

// FuzzFingerprint: every fingerprint a store accepts seals, packs and opens
// to itself, and keyer's form packs to 37 bytes.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{"v1:" + strings.Repeat("0a", 32), "v1:fingerprint", "a:", ":", "::ab", "x:ABCD", "x:abc", "fp1", "\u00e9:00", "v1:" + strings.Repeat("f", 64)} {
		f.Add(s)
	}
	d := testDerived(f)
	f.Fuzz(func(t *testing.T, fp string) {
		if fp == "" || len(fp) > MaxFingerprintLen || strings.ContainsRune(fp, 0) {
			return
		}
		p := packFingerprint(nil, fp)
		if got, ok := unpackFingerprint(p); !ok || got != fp {
			t.Fatalf("unpack(pack(%q)) = %q, %v", fp, got, ok)
		}
		s := d.sealFingerprint("some/key", fp)
		if s != d.sealFingerprint("some/key", fp) {
			t.Fatalf("sealing %q twice gave two forms", fp)
		}
		if s == d.sealFingerprint("other/key", fp) {
			t.Fatalf("%q under two store keys sealed alike", fp)
		}
		got, err := d.openFingerprint("some/key", s)
		if err != nil || got != fp {
			t.Fatalf("open(seal(%q)) = %q, %v", fp, got, err)
		}
		if _, err := d.openFingerprint("other/key", s); err == nil {
			t.Fatalf("%q sealed for one store key opened for another", fp)
		}
	})
}

// TestPackedKeyerFingerprint: keyer's fingerprints pack to 37 bytes, so
// sealed they are 77 characters where they are 67 in clear.
func TestPackedKeyerFingerprint(t *testing.T) {
	fp := "v1:" + strings.Repeat("0123456789abcdef", 4)
	if p := packFingerprint(nil, fp); len(p) != 37 {
		t.Fatalf("keyer's fingerprint packs into %d bytes, want 37", len(p))
	}
	if s := testDerived(t).sealFingerprint("k", fp); len(s) != 77 {
		t.Fatalf("sealed keyer fingerprint %q is %d characters, want 77", s, len(s))
	}
	// Upper-case hex, an odd length or a byte past 'f' is not packed.
	for _, fp := range []string{"v1:ABCD", "v1:abc", "v1:abcg"} {
		if p := packFingerprint(nil, fp); p[0] != packRaw {
			t.Errorf("%q packed in form %d, want raw", fp, p[0])
		}
	}
}

// TestOpenFingerprintRejectsTampering: a changed byte anywhere in the
// sealed form, or a form made of another fingerprint's IV, fails with
// ErrCorrupt.
func TestOpenFingerprintRejectsTampering(t *testing.T) {
	d := testDerived(t)
	fp := "v1:" + strings.Repeat("0123456789abcdef", 4)
	s := d.sealFingerprint("k", fp)
	head := len(fpPrefix) + len(d.id) + 1
	for i := head; i < len(s); i++ {
		b := []byte(s)
		b[i] = "AB"[0]
		if b[i] == s[i] {
			b[i] = 'B'
		}
		if got, err := d.openFingerprint("k", string(b)); err == nil {
			t.Fatalf("changed at %d: opened to %q", i, got)
		}
	}
	other := d.sealFingerprint("k", "v1:"+strings.Repeat("1", 64))
	spliced := s[:head+21] + other[head+21:]
	if got, err := d.openFingerprint("k", spliced); err == nil {
		t.Fatalf("IV of one fingerprint with the ciphertext of another opened to %q", got)
	}
}

// TestFingerprintAllocations: sealing a fingerprint allocates only its
// result, opening one its bytes and its result.
func TestFingerprintAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector mean nothing")
	}
	d := testDerived(t)
	fp := "v1:" + strings.Repeat("0123456789abcdef", 4)
	s := d.sealFingerprint("k", fp)
	if n := testing.AllocsPerRun(100, func() { _ = d.sealFingerprint("k", fp) }); n > 1 {
		t.Errorf("sealFingerprint: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.openFingerprint("k", s) }); n > 2 {
		t.Errorf("openFingerprint: %v allocations, want at most 2", n)
	}
}

func BenchmarkPack(b *testing.B) {
	fp := "v1:" + strings.Repeat("9f86d081884c7d65", 4)
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = packFingerprint(buf[:0], fp)
	}
}
