package keyer_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/keyer"
)

var secret = []byte("0123456789abcdef-shared-secret")

func TestHashKeysIsHMACSHA256(t *testing.T) {
	r, err := keyer.HashKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	key := "4:acme|5:alice|8:order-42"
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(key))
	want := "hmac:" + hex.EncodeToString(m.Sum(nil)[:16])
	if got := r(key); got != want {
		t.Fatalf("HashKeys(%q) = %q, want %q", key, got, want)
	}
	if got := r.Redact(key); got != want {
		t.Fatalf("Redact = %q, want %q", got, want)
	}
}

func TestHashKeysHidesTheKey(t *testing.T) {
	r, err := keyer.HashKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	key := "4:acme|5:alice|8:order-42"
	got := r(key)
	for _, part := range []string{"acme", "alice", "order-42"} {
		if strings.Contains(got, part) {
			t.Errorf("hashed key %q shows %q", got, part)
		}
	}
	if r(key) != got {
		t.Error("the same key hashed twice differs")
	}
	if r(key+"x") == got {
		t.Error("two keys hash alike")
	}
	other, err := keyer.HashKeys([]byte("another-secret-of-enough-length"))
	if err != nil {
		t.Fatal(err)
	}
	if other(key) == got {
		t.Error("two secrets hash a key alike")
	}
}

func TestHashKeysCopiesTheSecret(t *testing.T) {
	s := append([]byte(nil), secret...)
	r, err := keyer.HashKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	before := r("k")
	s[0] ^= 0xff
	if r("k") != before {
		t.Fatal("changing the caller's slice changed the hash")
	}
}

func TestHashKeysShortSecret(t *testing.T) {
	for _, s := range [][]byte{nil, {}, []byte("fifteen-bytes!!")} {
		r, err := keyer.HashKeys(s)
		if !errors.Is(err, keyer.ErrShortSecret) {
			t.Errorf("HashKeys(%d bytes): err = %v, want ErrShortSecret", len(s), err)
		}
		if r != nil {
			t.Errorf("HashKeys(%d bytes) returned a redactor with its error", len(s))
		}
		if err != nil && !strings.HasPrefix(err.Error(), "keyer: hash keys: ") {
			t.Errorf("error %q does not name package and call", err)
		}
	}
	if _, err := keyer.HashKeys(make([]byte, keyer.MinSecretLen)); err != nil {
		t.Errorf("HashKeys(MinSecretLen bytes): %v", err)
	}
}

func TestDefaultRedactor(t *testing.T) {
	key := "4:acme|9:secret-id"
	a, b := keyer.DefaultRedactor()(key), keyer.DefaultRedactor()(key)
	if a != b {
		t.Fatalf("the process redactor hashed one key two ways: %q, %q", a, b)
	}
	if !strings.HasPrefix(a, "hmac:") || len(a) != len("hmac:")+32 || strings.Contains(a, "secret-id") {
		t.Fatalf("DefaultRedactor(%q) = %q, want hmac: and 32 hex digits", key, a)
	}
	var nilR keyer.Redactor
	if got := nilR.Redact(key); got != a {
		t.Fatalf("nil Redactor.Redact = %q, want the default %q", got, a)
	}
	fixed, err := keyer.HashKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	if fixed(key) == a {
		t.Fatal("the process key equals a fixed test secret")
	}
}

func TestRawAndOmitKeys(t *testing.T) {
	if got := keyer.RawKeys()("4:acme|1:k"); got != "4:acme|1:k" {
		t.Errorf("RawKeys = %q", got)
	}
	if got := keyer.OmitKeys()("4:acme|1:k"); got != "" {
		t.Errorf("OmitKeys = %q", got)
	}
}

// TestHashKeysConcurrent runs one redactor from many goroutines (the pooled
// HMAC states must not be shared); run it under -race.
func TestHashKeysConcurrent(t *testing.T) {
	r, err := keyer.HashKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "bb", "ccc", "dddd"}
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i] = r(k)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 500; n++ {
				i := (g + n) % len(keys)
				if got := r(keys[i]); got != want[i] {
					errs <- keys[i] + " hashed to " + got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestRedactHandlerHashesOnce: a key that idemkit's packages already logged
// hashed passes RedactHandler unchanged; a raw key and a value that only
// looks hashed are hashed.
func TestRedactHandlerHashesOnce(t *testing.T) {
	var buf bytes.Buffer
	red := keyer.DefaultRedactor()
	logger := slog.New(keyer.RedactHandler(slog.NewJSONHandler(&buf, nil), red))
	hashed := red("4:acme|8:order-42")
	if !keyer.IsHashed(hashed) {
		t.Fatalf("IsHashed(%q) = false", hashed)
	}
	for _, v := range []string{"hmac:xyz", "hmac:" + strings.Repeat("A", 32), "hmac:" + strings.Repeat("0", 31), "4:acme|8:order-42"} {
		if keyer.IsHashed(v) {
			t.Errorf("IsHashed(%q) = true", v)
		}
	}
	logger.Info("already hashed", "key", hashed)
	logger.Info("raw", "key", "4:acme|8:order-42")
	logger.Info("looks hashed", "key", "hmac:xyz")
	out := buf.String()
	if n := strings.Count(out, `"key":"`+hashed+`"`); n != 2 {
		t.Errorf("the hashed key appears %d times, want 2 (hashed once, not twice):\n%s", n, out)
	}
	for _, raw := range []string{"order-42", "hmac:xyz"} {
		if strings.Contains(out, raw) {
			t.Errorf("%q logged raw:\n%s", raw, out)
		}
	}
}
