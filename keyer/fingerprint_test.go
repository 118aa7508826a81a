package keyer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/keyer"
)

// newFP returns a Fingerprinter made with opts, failing the test if it
// cannot be made.
func newFP(t testing.TB, opts ...keyer.FingerprintOption) *keyer.Fingerprinter {
	t.Helper()
	f, err := keyer.NewFingerprinter(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func req(t *testing.T, method, target, ctype, body string, hdr ...string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func fp(t *testing.T, f *keyer.Fingerprinter, r *http.Request) string {
	t.Helper()
	s, err := f.Fingerprint(r)
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	if !strings.HasPrefix(s, "v1:") || len(s) != 3+64 {
		t.Fatalf("Fingerprint = %q, want v1: and 64 hex digits", s)
	}
	return s
}

func TestFingerprintSameAndDifferent(t *testing.T) {
	const ct = "application/json"
	plain := newFP(t)
	canon := newFP(t, keyer.WithCanonicalJSON())
	omit := newFP(t, keyer.WithoutFields("sent_at"))
	hdrs := newFP(t, keyer.WithHeaders("x-tenant"))
	base := func() *http.Request { return req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"EUR"}`) }
	tests := []struct {
		name string
		f    *keyer.Fingerprinter
		r    *http.Request
		same bool
	}{
		{"identical", plain, base(), true},
		{"plain: key order matters", plain, req(t, "POST", "/payments?x=1", ct, `{"currency":"EUR","amount":1990}`), false},
		{"method", plain, req(t, "PATCH", "/payments?x=1", ct, `{"amount":1990,"currency":"EUR"}`), false},
		{"path", plain, req(t, "POST", "/payment?x=1", ct, `{"amount":1990,"currency":"EUR"}`), false},
		{"query", plain, req(t, "POST", "/payments?x=2", ct, `{"amount":1990,"currency":"EUR"}`), false},
		{"query moved into path", plain, req(t, "POST", "/payments%3Fx=1", ct, `{"amount":1990,"currency":"EUR"}`), false},
		{"body", plain, req(t, "POST", "/payments?x=1", ct, `{"amount":9999,"currency":"EUR"}`), false},
		{"header not chosen", plain, req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"EUR"}`, "X-Tenant", "b"), true},
		{"content type not chosen", plain, req(t, "POST", "/payments?x=1", "text/plain", `{"amount":1990,"currency":"EUR"}`), true},
		{"canon: key order", canon, req(t, "POST", "/payments?x=1", ct, `{"currency":"EUR","amount":1990}`), true},
		{"canon: whitespace", canon, req(t, "POST", "/payments?x=1", ct+"; charset=utf-8", " {\n\"amount\" : 1990 ,\t\"currency\":\"EUR\"}\n"), true},
		{"canon: string escapes", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"\u0045UR"}`), true},
		{"canon: number literal", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":1990.0,"currency":"EUR"}`), false},
		{"canon: number value", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":1991,"currency":"EUR"}`), false},
		{"canon: string value", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"eur"}`), false},
		{"canon: number vs string", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":"1990","currency":"EUR"}`), false},
		{"canon: extra field", canon, req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"EUR","x":null}`), false},
		{"canon: not json type", canon, req(t, "POST", "/payments?x=1", "text/plain", `{"currency":"EUR","amount":1990}`), false},
		{"canon: +json type", canon, req(t, "POST", "/payments?x=1", "application/merge-patch+json", `{"currency":"EUR","amount":1990}`), true},
		{"omit: ignored field", omit, req(t, "POST", "/payments?x=1", ct, `{"sent_at":"2026-01-01","currency":"EUR","amount":1990}`), true},
		{"omit: other field kept", omit, req(t, "POST", "/payments?x=1", ct, `{"sent_at2":"x","currency":"EUR","amount":1990}`), false},
		{"headers: chosen header differs", hdrs, req(t, "POST", "/payments?x=1", ct, `{"amount":1990,"currency":"EUR"}`, "X-Tenant", "b"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fp(t, tt.f, base()), fp(t, tt.f, tt.r)
			if (a == b) != tt.same {
				t.Fatalf("same = %v, want %v (%s vs %s)", a == b, tt.same, a, b)
			}
		})
	}
	// The raw and canonical fingerprints of one JSON body differ (tagged modes).
	if fp(t, plain, base()) == fp(t, canon, base()) {
		t.Fatal("raw and canonical fingerprints of the same body are equal")
	}
}

func TestFingerprintHeaderValues(t *testing.T) {
	f := newFP(t, keyer.WithHeaders("X-A", "x-b", "X-A"))
	r1 := req(t, "POST", "/", "", "", "X-A", "1,2")
	r2 := req(t, "POST", "/", "", "", "X-A", "1", "X-A", "2")
	r3 := req(t, "POST", "/", "", "", "X-B", "1,2")
	if fp(t, f, r1) == fp(t, f, r2) || fp(t, f, r1) == fp(t, f, r3) {
		t.Fatal("header values or names are ambiguous in the fingerprint")
	}
}

func TestFingerprintBodyStaysReadable(t *testing.T) {
	f := newFP(t)
	r := req(t, "POST", "/", "", "hello body")
	fp(t, f, r)
	got, err := io.ReadAll(r.Body)
	if err != nil || string(got) != "hello body" {
		t.Fatalf("body after Fingerprint = %q, %v", got, err)
	}
	if err := r.Body.Close(); err != nil {
		t.Fatal(err)
	}
	// No body at all.
	r = httptest.NewRequest("POST", "/", nil)
	a := fp(t, f, r)
	b := fp(t, f, req(t, "POST", "/", "", ""))
	if a != b {
		t.Fatal("no body and an empty body differ")
	}
}

func TestFingerprintBodyLimit(t *testing.T) {
	f := newFP(t, keyer.WithMaxBody(10))
	if f.MaxBody() != 10 {
		t.Fatalf("MaxBody = %d", f.MaxBody())
	}
	if _, err := f.Fingerprint(req(t, "POST", "/", "", "0123456789")); err != nil {
		t.Fatalf("body at the limit: %v", err)
	}
	_, err := f.Fingerprint(req(t, "POST", "/", "", "0123456789a"))
	if !errors.Is(err, keyer.ErrBodyTooLarge) {
		t.Fatalf("body over the limit (Content-Length known): %v", err)
	}
	r := req(t, "POST", "/", "", "")
	r.Body = io.NopCloser(strings.NewReader("0123456789ab"))
	r.ContentLength = -1
	if _, err := f.Fingerprint(r); !errors.Is(err, keyer.ErrBodyTooLarge) {
		t.Fatalf("body over the limit (chunked): %v", err)
	}
	r.Body = io.NopCloser(io.MultiReader(strings.NewReader("ab"), errReader{}))
	if _, err := f.Fingerprint(r); err == nil || errors.Is(err, keyer.ErrBodyTooLarge) || !errors.Is(err, errBoom) {
		t.Fatalf("read error: %v", err)
	}
}

var errBoom = errors.New("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		in, want string
		omit     []string
	}{
		{`{"b":1,"a":[true,false,null,"x"]}`, `{"a":[true,false,null,"x"],"b":1}`, nil},
		{` { "z" : { "y":1, "x":2 } } `, `{"z":{"x":2,"y":1}}`, nil},
		{`"\u00e9\n\""`, `"é\u000a\""`, nil},
		{`1.50`, `1.50`, nil},
		{`-0`, `-0`, nil},
		{`{"a":1,"t":2}`, `{"a":1}`, []string{"t"}},
		{`{"a":{"t":1}}`, `{"a":{"t":1}}`, []string{"t"}}, // only top-level members are left out
		{`[]`, `[]`, nil},
		{`{}`, `{}`, nil},
		{` [ 1 , { } , [ ] , "a" ] `, `[1,{},[],"a"]`, nil},
		{`"\ud83d\ude00 \/ \b\f\n\r\t"`, "\"\U0001F600 / \\u0008\\u000c\\u000a\\u000d\\u0009\"", nil},
		{`{"\u0061":1}`, `{"a":1}`, nil},
		{`-0.5e+10`, `-0.5e+10`, nil},
		{`1E5`, `1E5`, nil},
	}
	for _, tt := range tests {
		got, ok := keyer.CanonicalJSON([]byte(tt.in), tt.omit...)
		if !ok || string(got) != tt.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1,}`, `{"a":1}{}`, `{"a":1} x`, `{"a":1,"a":2}`, "\"\xff\"", `[` + strings.Repeat("[", 300) + strings.Repeat("]", 301), `nul`, `-`, `1.`, `.5`, `1e`, `+1`, `01`, `[01]`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\x"`, `"a` + "\n" + `"`, `{"a"}`, `{1:2}`, `[1 2]`, `truex`} {
		if got, ok := keyer.CanonicalJSON([]byte(bad)); ok {
			t.Errorf("CanonicalJSON(%q) = %s, true; want false", bad, got)
		}
	}
}

// FuzzCanonicalJSON checks four properties on any input: only valid JSON is
// canonicalised, into valid JSON; canonicalisation is idempotent;
// re-indenting a document does not change its canonical form; and equal
// canonical forms mean equal values (decoded with UseNumber).
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":2}`, `[1,"x",{"k":[null]}]`, `"\u0041"`, `1e3`, `{"a":{"b":{"c":1.0}}}`, `{"a":1,"a":1}`} {
		f.Add([]byte(s), []byte(`{"a":2,"b":1}`))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ca, okA := keyer.CanonicalJSON(a)
		if okA && (!json.Valid(a) || !json.Valid(ca)) {
			t.Fatalf("CanonicalJSON accepted %q (valid: %v) giving %q (valid: %v)", a, json.Valid(a), ca, json.Valid(ca))
		}
		if okA {
			again, ok := keyer.CanonicalJSON(ca)
			if !ok || !bytes.Equal(again, ca) {
				t.Fatalf("not idempotent: %q -> %q -> %q, %v", a, ca, again, ok)
			}
			var ind bytes.Buffer
			if err := json.Indent(&ind, a, "  ", "\t"); err == nil {
				ci, ok := keyer.CanonicalJSON(ind.Bytes())
				if !ok || !bytes.Equal(ci, ca) {
					t.Fatalf("indenting changed the canonical form: %q -> %q vs %q", a, ca, ci)
				}
			}
		}
		cb, okB := keyer.CanonicalJSON(b)
		if okA && okB && bytes.Equal(ca, cb) {
			if va, vb := decode(t, a), decode(t, b); !reflect.DeepEqual(va, vb) {
				t.Fatalf("%q and %q share canonical form %q but decode to %#v and %#v", a, b, ca, va, vb)
			}
		}
	})
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("CanonicalJSON accepted %q but json cannot decode it: %v", b, err)
	}
	return v
}

// TestFingerprintBodyRewinds: the body left for the handler is an
// io.Seeker, so a handler run again reads it from the start; offsets outside
// the body are refused.
func TestFingerprintBodyRewinds(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/p", strings.NewReader("hello"))
	if _, err := newFP(t).Fingerprint(r); err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(r.Body)
	s, ok := r.Body.(io.Seeker)
	if !ok {
		t.Fatalf("r.Body is a %T, not an io.Seeker", r.Body)
	}
	if _, err := s.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	again, _ := io.ReadAll(r.Body)
	if string(first) != "hello" || string(again) != "hello" {
		t.Fatalf("read %q, then %q after rewinding; want hello twice", first, again)
	}
	for _, off := range []int64{-1, 6} {
		if _, err := s.Seek(off, io.SeekStart); err == nil {
			t.Errorf("Seek(%d) accepted", off)
		}
	}
}
