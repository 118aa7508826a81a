package httpidem_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// discardWriter is a ResponseWriter that keeps nothing, reused across
// iterations so the benchmark measures the middleware, not the recorder.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

var benchBody = []byte(`{"amount":1990,"currency":"EUR"}`)

// benchHandler is the bare handler: read the body, answer 201 with JSON.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"id":1,"amount":1990}`))
})

// benchRun serves one POST per iteration with key(i) as its Idempotency-Key.
// Request and writer are reused: each iteration resets the body and the
// response header, the same work for the bare handler and the middleware.
func benchRun(b *testing.B, h http.Handler, key func(i int) string, wantCode int) {
	b.Helper()
	body := bytes.NewReader(benchBody)
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: "/payments"},
		Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {""}},
		Body:   io.NopCloser(body), ContentLength: int64(len(benchBody)),
	}
	r = r.WithContext(b.Context())
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body.Reset(benchBody)
		r.Body = io.NopCloser(body)
		r.Header["Idempotency-Key"][0] = key(i)
		clear(w.h)
		h.ServeHTTP(w, r)
		if w.code != wantCode {
			b.Fatalf("status %d, want %d", w.code, wantCode)
		}
	}
}

// BenchmarkOverhead compares, in one run, the bare handler with the same
// handler behind the middleware on store/memory: a first request (a new key
// each time: claim, run, store) and a replay (one key, stored once).
// store-only is the store's own work in a first request (a token, Claim and
// Complete of a new key), so first - bare - store-only is what the
// middleware itself adds. Keys are made before the timer starts.
func BenchmarkOverhead(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		benchRun(b, benchHandler, func(int) string { return "k" }, http.StatusCreated)
	})
	b.Run("store-only", func(b *testing.B) {
		// The store's own share of a first request: token, Claim, Complete.
		s := mustMemory(b)
		b.Cleanup(func() { s.Close() })
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = "2:key-" + strconv.Itoa(i)
		}
		resp := []byte("\x01\xc9\x01\x01\x0cContent-Type\x10application/json{\"id\":1,\"amount\":1990}")
		ctx := b.Context()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tok := store.NewToken()
			if _, err := s.Claim(ctx, keys[i], "v1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", tok, idem.DefaultLease); err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, keys[i], tok, resp, idem.DefaultRetention); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		s := mustMemory(b)
		b.Cleanup(func() { s.Close() })
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = "key-" + strconv.Itoa(i)
		}
		benchRun(b, mustNew(b, s)(benchHandler), func(i int) string { return keys[i] }, http.StatusCreated)
	})
	b.Run("replay", func(b *testing.B) {
		s := mustMemory(b)
		b.Cleanup(func() { s.Close() })
		mw := mustNew(b, s)(benchHandler)
		benchRun(b, mw, func(int) string { return "k" }, http.StatusCreated)
	})
}
