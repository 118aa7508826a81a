package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkCrypto measures the seal's own work per operation, one
// goroutine, without a store: the primitives alone (AES-256-GCM of a 1 KiB
// response, HMAC-SHA256 of a fingerprint) and the seal's steps around them.
// Their sum is the floor of what sealing adds to a store call, whatever the
// store: a cycle seals one fingerprint and one response, a replay seals a
// fingerprint and opens a response.
//
//	go test -run '^$' -bench '^BenchmarkCrypto$' -benchmem ./store/seal/
func BenchmarkCrypto(b *testing.B) {
	const key, fp = "cycle-0123456789-42", "v1:9f86d081884c7d659f86d081884c7d659f86d081884c7d659f86d081884c7d65"
	resp := make([]byte, 1<<10)
	_, _ = rand.Read(resp)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)

	// The primitives, as the standard library gives them.
	blk, err := aes.NewCipher(secret)
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(blk)
	if err != nil {
		b.Fatal(err)
	}
	nonce, ad := make([]byte, nonceLen), []byte(key)
	buf := make([]byte, 0, len(resp)+64)
	b.Run("primitive/AES-GCM-seal/1KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = gcm.Seal(buf[:0], nonce, resp, ad)
		}
	})
	sealed := gcm.Seal(nil, nonce, resp, ad)
	b.Run("primitive/AES-GCM-open/1KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gcm.Open(buf[:0], nonce, sealed, ad); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("primitive/random-nonce", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = rand.Read(nonce)
		}
	})
	mac := hmac.New(sha256.New, secret)
	var sum [sha256.Size]byte
	msg := []byte(key + "\x00" + fp)
	b.Run("primitive/HMAC-SHA256/fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mac.Reset()
			mac.Write(msg)
			mac.Sum(sum[:0])
		}
	})

	// The seal's steps.
	keys := NewLocalKeys()
	if err := keys.Add("", "k1", secret); err != nil {
		b.Fatal(err)
	}
	kr := &keyring{p: keys}
	d, err := kr.current(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("step/current-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := kr.current(context.Background(), ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step/seal-fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.sealFingerprint(key, fp)
		}
	})
	b.Run("step/seal-response/1KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.sealResponse(key, resp)
		}
	})
	sr := d.sealResponse(key, resp)
	work := make([]byte, len(sr))
	b.Run("step/open-response/1KiB", func(b *testing.B) {
		// Opened in place, as a store's copy is: the copy into work is
		// part of the loop (about 30 ns).
		b.ReportAllocs()
		for b.Loop() {
			copy(work, sr)
			if _, err := d.openResponse(key, work); err != nil {
				b.Fatal(err)
			}
		}
	})
}
