package keyer_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

func TestErrInvalidIsStoreErrInvalid(t *testing.T) {
	if keyer.ErrInvalid != store.ErrInvalid {
		t.Fatal("keyer.ErrInvalid and store.ErrInvalid are different values")
	}
}

func TestFingerprinterOptionsRefuseBadValues(t *testing.T) {
	for name, opt := range map[string]keyer.FingerprintOption{
		"WithMaxBody(-5)":           keyer.WithMaxBody(-5),
		"WithMaxBody(0)":            keyer.WithMaxBody(0),
		`WithHeaders("")`:           keyer.WithHeaders(""),
		`WithHeaders("bad header")`: keyer.WithHeaders("bad header"),
		"WithHeaders()":             keyer.WithHeaders(),
		`WithoutFields("")`:         keyer.WithoutFields(""),
		"WithoutFields()":           keyer.WithoutFields(),
		"nil option":                nil,
		`WithHeaders("X-A:")`:       keyer.WithHeaders("X-A:"),
		`WithHeaders("ok", "a\tb")`: keyer.WithHeaders("ok", "a\tb"),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := keyer.NewFingerprinter(keyer.WithCanonicalJSON(), opt)
			if !errors.Is(err, keyer.ErrInvalid) || f != nil {
				t.Fatalf("NewFingerprinter = %v, %v; want nil and an error matching ErrInvalid", f, err)
			}
			if msg := err.Error(); strings.Count(msg, "invalid argument") != 1 || !strings.HasPrefix(msg, "keyer: new fingerprinter: ") {
				t.Errorf("message %q: want one %q after the package's prefix", msg, "invalid argument")
			}
		})
	}
	if _, err := keyer.NewFingerprinter(keyer.WithMaxBody(1), keyer.WithHeaders("x-tenant"), keyer.WithoutFields("ts")); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

func TestCheckKeyIsTheOneRule(t *testing.T) {
	for _, bad := range []string{"", "a b", " lead", "trail ", "tab\there", "null", strings.Repeat("k", keyer.MaxKeyLen+1), "é", "nul\x00"} {
		if err := keyer.CheckKey(bad); !errors.Is(err, keyer.ErrMalformedKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrMalformedKey", bad, err)
		}
		// ParseValue (the server's reading of the header) agrees.
		if _, err := keyer.ParseValue(`"` + strings.ReplaceAll(bad, `"`, `\"`) + `"`); err == nil {
			t.Errorf("ParseValue accepts %q, which CheckKey refuses", bad)
		}
	}
	for _, good := range []string{"k", "8e03978e-1c9a-4b6e-9a43-0c6f1f0b2a11", `q"uote`, `back\slash`, strings.Repeat("k", keyer.MaxKeyLen), "~!#"} {
		if err := keyer.CheckKey(good); err != nil {
			t.Errorf("CheckKey(%q) = %v", good, err)
		}
	}
}

func TestCanonicalMethodAndHeader(t *testing.T) {
	for in, want := range map[string]string{"post": "POST", "POST": "POST", "Patch": "PATCH", "M-SEARCH": "M-SEARCH"} {
		if got, err := keyer.CanonicalMethod(in); err != nil || got != want {
			t.Errorf("CanonicalMethod(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "BAD METHOD", "POST\n", "GET/1", "ПОСТ"} {
		if _, err := keyer.CanonicalMethod(bad); !errors.Is(err, keyer.ErrInvalid) {
			t.Errorf("CanonicalMethod(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if got, err := keyer.CanonicalHeader("x-request-id"); err != nil || got != "X-Request-Id" {
		t.Errorf("CanonicalHeader = %q, %v", got, err)
	}
	for _, bad := range []string{"", "bad header", "X:Y", "X-Ä"} {
		if _, err := keyer.CanonicalHeader(bad); !errors.Is(err, keyer.ErrInvalid) {
			t.Errorf("CanonicalHeader(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if set, err := keyer.CanonicalMethods("WithMethods"); err != nil || len(set) != 0 {
		t.Errorf("CanonicalMethods with no method = %v, %v; want an empty set", set, err)
	}
	if _, err := keyer.CanonicalMethods("WithMethods", "POST", "BAD METHOD"); !errors.Is(err, keyer.ErrInvalid) || !strings.HasPrefix(err.Error(), "WithMethods: ") {
		t.Errorf("CanonicalMethods with a bad method = %v, want ErrInvalid naming the option", err)
	}
	set, err := keyer.CanonicalMethods("WithMethods", "post", "PATCH")
	if err != nil || !set["POST"] || !set["PATCH"] || len(set) != 2 {
		t.Errorf("CanonicalMethods = %v, %v", set, err)
	}
}

// TestCanonicalJSONCaseFoldedNames: encoding/json fills one struct field
// from members whose names differ only in case (the last wins), so two
// bodies that differ only in those members' order mean different things and
// must not share a fingerprint.
func TestCanonicalJSONCaseFoldedNames(t *testing.T) {
	var a, b struct{ Amount int }
	first, second := `{"amount":1,"AMOUNT":1000}`, `{"AMOUNT":1000,"amount":1}`
	if json.Unmarshal([]byte(first), &a) != nil || json.Unmarshal([]byte(second), &b) != nil || a == b {
		t.Fatalf("premise: encoding/json reads %s as %v and %s as %v", first, a, second, b)
	}
	f := newFP(t, keyer.WithCanonicalJSON())
	fa, err := f.Fingerprint(req(t, "POST", "/pay", "application/json", first))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := f.Fingerprint(req(t, "POST", "/pay", "application/json", second))
	if err != nil {
		t.Fatal(err)
	}
	if fa == fb {
		t.Fatalf("%s and %s share fingerprint %s", first, second, fa)
	}
	for _, doc := range []string{
		first, second,
		`{"a":{"Kind":1,"kind":2}}`, // nested
		`[{"x":1,"X":2}]`,           // in an array
		`{"k":1,"\u212a":2}`,        // KELVIN SIGN folds to k, as encoding/json matches it
		`{"s":1,"\u017f":2}`,        // LONG S folds to s
		`{"ß":1,"ẞ":2}`,             // SHARP S and CAPITAL SHARP S fold together
		`{"a":1,"a":2}`,             // exact duplicates, as before
	} {
		if c, ok := keyer.CanonicalJSON([]byte(doc)); ok {
			t.Errorf("CanonicalJSON(%s) = %s, true; want false (ambiguous member names)", doc, c)
		}
	}
	// An omitted member that collides with a kept one is ambiguous too.
	if _, ok := keyer.CanonicalJSON([]byte(`{"ts":1,"TS":2,"a":3}`), "ts"); ok {
		t.Error("CanonicalJSON keeps TS beside an omitted ts")
	}
	// Names that merely look alike stay canonical.
	for _, doc := range []string{`{"a":1,"b":2}`, `{"ab":1,"a_b":2}`, `{"é":1,"e":2}`, `{"Kx":1,"K":2}`} {
		if _, ok := keyer.CanonicalJSON([]byte(doc)); !ok {
			t.Errorf("CanonicalJSON(%s) refused distinct names", doc)
		}
	}
}
