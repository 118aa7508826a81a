package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// downStore is a store whose claims fail, as a backend's would when its
// server is gone: the error quotes the key, as the Redis backend's do.
type downStore struct{ store.Store }

func (downStore) Claim(_ context.Context, key, _ string, _ store.Token, _ time.Duration) (store.Claim, error) {
	return store.Claim{}, fmt.Errorf("backend: claim: key %q: %w", key, errors.New("connection refused"))
}

// A store failure is logged with the key hashed, in the key attribute and
// in the error's text alike: neither the tenant nor the client's key is in
// the line.
func ExampleWithKeyRedactor() {
	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	red, err := keyer.HashKeys([]byte("a shared secret, 16+ bytes"))
	if err != nil {
		panic(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output for the example
			}
			return a
		},
	}))
	e, err := idem.New(downStore{st},
		idem.WithKeyRedactor(red), // the default hashes with a per-process secret
		idem.WithLogger(logger))
	if err != nil {
		panic(err)
	}
	mw, err := httpidem.New(e,
		httpidem.WithScope(func(*http.Request) ([]string, error) { return []string{"tenant-acme"}, nil }))
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) }))
	r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", `"order-1"`)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code)
	// Output:
	// level=ERROR msg="httpidem: store failed" key=hmac:a94f854ea389723d7b8ee3dd743c1413 err="idem: claim \"hmac:a94f854ea389723d7b8ee3dd743c1413\": idem: store unavailable: backend: claim: key \"hmac:a94f854ea389723d7b8ee3dd743c1413\": connection refused"
	// 503
}
