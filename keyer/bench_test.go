package keyer_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemkit/idemkit/keyer"
)

// BenchmarkFingerprint compares a Fingerprint of a small JSON POST with the
// floor: reading the same body and hex-encoding its SHA-256.
func BenchmarkFingerprint(b *testing.B) {
	body := []byte(`{"amount":1990,"currency":"EUR"}`)
	br := bytes.NewReader(body)
	newReq := func() *http.Request {
		return &http.Request{Method: "POST", URL: &url.URL{Path: "/payments"},
			Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(body))}
	}
	b.Run("sha256-body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			br.Reset(body)
			got, _ := io.ReadAll(br)
			sum := sha256.Sum256(got)
			_ = hex.EncodeToString(sum[:])
		}
	})
	for _, c := range []struct {
		name string
		f    *keyer.Fingerprinter
	}{{"raw", newFP(b)}, {"canonical-json", newFP(b, keyer.WithCanonicalJSON())}} {
		b.Run(c.name, func(b *testing.B) {
			r := newReq()
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(body)
				r.Body = io.NopCloser(br)
				if _, err := c.f.Fingerprint(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScopedKey measures the store key a middleware builds for every
// request: a client key under a tenant and a caller.
func BenchmarkScopedKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := keyer.ScopedKey("8e03978e-40d5-43e8-bc93-6894a57f9324", "acme", "alice"); err != nil {
			b.Fatal(err)
		}
	}
}
