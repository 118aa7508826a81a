package keyer_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/idemkit/idemkit/keyer"
)

func ExampleParse() {
	r := httptest.NewRequest("POST", "/payments", nil)
	r.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	key, err := keyer.Parse(r.Header)
	fmt.Println(key, err)

	r.Header.Set("Idempotency-Key", "null")
	_, err = keyer.Parse(r.Header)
	fmt.Println(err)
	// Output:
	// 8e03978e-40d5-43e8-bc93-6894a57f9324 <nil>
	// keyer: the Idempotency-Key is null
}

func ExampleScopedKey() {
	k, _ := keyer.ScopedKey("8e03978e", "tenant-7", "user-42")
	fmt.Println(k)
	// Output: 8:tenant-7|7:user-42|8:8e03978e
}

func ExampleFingerprinter() {
	f, err := keyer.NewFingerprinter(keyer.WithoutFields("sent_at"))
	if err != nil {
		fmt.Println(err)
		return
	}
	a := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount": 1990, "sent_at": 1}`))
	a.Header.Set("Content-Type", "application/json")
	b := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"sent_at":2,"amount":1990}`))
	b.Header.Set("Content-Type", "application/json")
	fa, _ := f.Fingerprint(a)
	fb, _ := f.Fingerprint(b)
	fmt.Println(fa == fb, fa[:3])
	// Output: true v1:
}

func ExampleCanonicalJSON() {
	a, _ := keyer.CanonicalJSON([]byte(`{ "b": [1, 2.0], "a": "\u00e9" }`))
	b, _ := keyer.CanonicalJSON([]byte(`{"a":"é","b":[1,2.0]}`))
	fmt.Println(string(a), string(a) == string(b))
	_, ok := keyer.CanonicalJSON([]byte(`{"a":1,"a":2}`))
	fmt.Println(ok)
	// Output:
	// {"a":"é","b":[1,2.0]} true
	// false
}

// Keys go into logs hashed: the same key gives the same hash under one
// secret, so a request's lines and its retries' lines can be found together,
// but the tenant and the client's key cannot be read back.
func ExampleHashKeys() {
	redact, err := keyer.HashKeys([]byte("a secret every process shares"))
	if err != nil {
		fmt.Println(err)
		return
	}
	key, _ := keyer.ScopedKey("order-42", "acme")
	fmt.Println(key)
	fmt.Println(redact(key))
	again := redact(key) // the same key, hashed again
	fmt.Println(redact(key) == again)
	fmt.Printf("%q\n", keyer.OmitKeys()(key))
	// Output:
	// 4:acme|8:order-42
	// hmac:fdc93296b4aa087412c9a9a0e0a3c310
	// true
	// ""
}

// Wrap the logger given to idemkit (or any logger whose lines carry keys):
// attributes named "key" are written hashed.
func ExampleRedactHandler() {
	redact, _ := keyer.HashKeys([]byte("a secret every process shares"))
	text := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // stable output for the example
			}
			return a
		},
	})
	logger := slog.New(keyer.RedactHandler(text, redact))
	logger.Warn("httpidem: store failed", "key", "4:acme|8:order-42", "err", "timeout")
	// Output:
	// level=WARN msg="httpidem: store failed" key=hmac:fdc93296b4aa087412c9a9a0e0a3c310 err=timeout
}
