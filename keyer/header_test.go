package keyer_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/keyer"
)

func TestParseValue(t *testing.T) {
	long := strings.Repeat("a", keyer.MaxKeyLen)
	tests := []struct {
		name   string
		in     string
		want   string
		reason keyer.Reason
	}{
		{"quoted uuid", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", 0},
		{"bare uuid", `8e03978e-40d5-43e8-bc93-6894a57f9324`, "8e03978e-40d5-43e8-bc93-6894a57f9324", 0},
		{"ows around", " \t\"k1\"\t ", "k1", 0},
		{"bare ows around", "  k1  ", "k1", 0},
		{"escaped quote", `"a\"b"`, `a"b`, 0},
		{"escaped backslash", `"a\\b"`, `a\b`, 0},
		{"max length quoted", `"` + long + `"`, long, 0},
		{"max length bare", long, long, 0},
		{"one char", "x", "x", 0},
		{"bare with symbols", "key_1.2~3:4/5", "key_1.2~3:4/5", 0},
		{"empty", "", "", keyer.ReasonEmpty},
		{"only spaces", "   ", "", keyer.ReasonEmpty},
		{"only tabs", "\t\t", "", keyer.ReasonEmpty},
		{"empty string", `""`, "", keyer.ReasonEmpty},
		{"quoted spaces", `"   "`, "", keyer.ReasonEmpty},
		{"null bare", "null", "", keyer.ReasonNull},
		{"null quoted", `"null"`, "", keyer.ReasonNull},
		{"too long bare", long + "a", "", keyer.ReasonTooLong},
		{"too long quoted", `"` + long + `a"`, "", keyer.ReasonTooLong},
		{"space inside bare", "a b", "", keyer.ReasonBadChar},
		{"space inside quoted", `"a b"`, "", keyer.ReasonBadChar},
		{"non-ascii bare", "clé", "", keyer.ReasonBadChar},
		{"non-ascii quoted", `"clé"`, "", keyer.ReasonBadChar},
		{"control char", "a\x01b", "", keyer.ReasonBadChar},
		{"del", "a\x7fb", "", keyer.ReasonBadChar},
		{"quote inside bare", `a"b`, "", keyer.ReasonBadChar},
		{"backslash inside bare", `a\b`, "", keyer.ReasonBadChar},
		{"list", "a, b", "", keyer.ReasonMultiple},
		{"list of strings", `"a", "b"`, "", keyer.ReasonBadString},
		{"unterminated", `"abc`, "", keyer.ReasonBadString},
		{"bad escape", `"a\nb"`, "", keyer.ReasonBadString},
		{"escape at end", `"abc\`, "", keyer.ReasonBadString},
		{"parameters", `"abc";x=1`, "", keyer.ReasonBadString},
		{"lone quote", `"`, "", keyer.ReasonBadString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keyer.ParseValue(tt.in)
			if tt.reason == 0 {
				if err != nil || got != tt.want {
					t.Fatalf("ParseValue(%q) = %q, %v; want %q, nil", tt.in, got, err, tt.want)
				}
				return
			}
			var ke *keyer.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("ParseValue(%q) = %q, %v; want a *KeyError", tt.in, got, err)
			}
			if ke.Reason != tt.reason {
				t.Fatalf("ParseValue(%q) reason = %v (%s); want %v", tt.in, ke.Reason, ke.Detail, tt.reason)
			}
			want := keyer.ErrMalformedKey
			if tt.reason == keyer.ReasonMultiple {
				want = keyer.ErrManyKeys
			}
			if !errors.Is(err, want) {
				t.Fatalf("ParseValue(%q) error %v does not match %v", tt.in, err, want)
			}
			if got != "" || !strings.HasPrefix(err.Error(), "keyer: ") {
				t.Fatalf("ParseValue(%q) = %q, %q", tt.in, got, err)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	h := http.Header{}
	if _, err := keyer.Parse(h); !errors.Is(err, keyer.ErrNoKey) {
		t.Fatalf("no header: %v, want ErrNoKey", err)
	}
	h.Set("idempotency-key", `"k1"`)
	if k, err := keyer.Parse(h); err != nil || k != "k1" {
		t.Fatalf("one header: %q, %v", k, err)
	}
	h.Add(keyer.Header, "k2")
	_, err := keyer.Parse(h)
	var ke *keyer.KeyError
	if !errors.Is(err, keyer.ErrManyKeys) || !errors.As(err, &ke) || ke.Reason != keyer.ReasonMultiple {
		t.Fatalf("two headers: %v, want ErrManyKeys", err)
	}
	if errors.Is(err, keyer.ErrMalformedKey) || errors.Is(err, keyer.ErrNoKey) {
		t.Fatalf("two headers: %v matches the wrong sentinel", err)
	}
}

// FuzzParseValue checks that ParseValue never panics, that every key it
// accepts obeys the rules, and that quoting an accepted key as a Structured
// Field string parses back to the same key.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{`"abc"`, "abc", `"a\"b"`, `""`, "null", " x ", `"a`, `"a\\"`, "a,b", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := keyer.ParseValue(v)
		if err != nil {
			var ke *keyer.KeyError
			if !errors.As(err, &ke) || ke.Detail == "" || k != "" {
				t.Fatalf("ParseValue(%q) = %q, %#v", v, k, err)
			}
			return
		}
		if len(k) < 1 || len(k) > keyer.MaxKeyLen || k == "null" {
			t.Fatalf("ParseValue(%q) accepted %q", v, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				t.Fatalf("ParseValue(%q) accepted %q with byte %#x", v, k, k[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if k2, err := keyer.ParseValue(quoted); err != nil || k2 != k {
			t.Fatalf("round trip of %q via %q = %q, %v", k, quoted, k2, err)
		}
	})
}

// TestHeaderIsCanonical: Parse reads h[Header] directly, which is
// h.Values(Header) only while Header is in canonical form.
func TestHeaderIsCanonical(t *testing.T) {
	if c := http.CanonicalHeaderKey(keyer.Header); c != keyer.Header {
		t.Fatalf("keyer.Header = %q, canonical form %q", keyer.Header, c)
	}
}
