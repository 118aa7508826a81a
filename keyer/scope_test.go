package keyer_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

func TestScopedKeyFormat(t *testing.T) {
	got, err := keyer.ScopedKey("k1", "acme", "alice")
	if err != nil || got != "4:acme|5:alice|2:k1" {
		t.Fatalf("ScopedKey = %q, %v", got, err)
	}
	got, err = keyer.ScopedKey("k1")
	if err != nil || got != "2:k1" {
		t.Fatalf("ScopedKey without scope = %q, %v", got, err)
	}
}

// TestScopedKeyAmbiguity lists pairs that a naive join ("a:b" + ":" + key)
// would confuse.
func TestScopedKeyAmbiguity(t *testing.T) {
	cases := [][]string{
		{"k", "a:b"}, {"k", "a", "b"}, {"b:k", "a"}, {"k", "a|b"}, {"k", "a", "", "b"},
		{"k", ""}, {"k"}, {"k", "", ""}, {"1:k", "0:"}, {"k", "1:k|"}, {"k|1:k"},
	}
	seen := map[string][]string{}
	for _, c := range cases {
		s, err := keyer.ScopedKey(c[0], c[1:]...)
		if err != nil {
			t.Fatalf("ScopedKey(%q): %v", c, err)
		}
		if prev, ok := seen[s]; ok {
			t.Fatalf("%q and %q both give %q", prev, c, s)
		}
		seen[s] = c
	}
}

// FuzzScopedKeyInjective: for any two (key, scope) inputs that are
// different, the store keys differ. Decoding the store key back to the parts
// proves injectivity for every input at once; the fuzzer also compares two
// inputs directly.
func FuzzScopedKeyInjective(f *testing.F) {
	f.Add("k", "a:b", "", "k", "a", "b")
	f.Add("1:k", "", "x", "k", "1:", "x")
	f.Add("k", "a|b", "c", "k|", "a", "b|c")
	f.Fuzz(func(t *testing.T, k1, a1, b1, k2, a2, b2 string) {
		in1, in2 := []string{a1, b1, k1}, []string{a2, b2, k2}
		s1, err1 := keyer.ScopedKey(k1, a1, b1)
		s2, err2 := keyer.ScopedKey(k2, a2, b2)
		for _, c := range []struct {
			in  []string
			s   string
			err error
		}{{in1, s1, err1}, {in2, s2, err2}} {
			if c.err != nil {
				continue
			}
			if len(c.s) > keyer.MaxStoreKeyLen || !utf8.ValidString(c.s) || strings.IndexByte(c.s, 0) >= 0 {
				t.Fatalf("ScopedKey(%q) = %q is not a valid store key", c.in, c.s)
			}
			if err := store.CheckKey(c.s); err != nil {
				t.Fatalf("ScopedKey(%q) = %q: %v", c.in, c.s, err)
			}
			parts, ok := keyer.SplitScopedKey(c.s)
			if !ok || !slices.Equal(parts, c.in) {
				t.Fatalf("SplitScopedKey(%q) = %q, %v; want %q", c.s, parts, ok, c.in)
			}
		}
		if err1 == nil && err2 == nil && (s1 == s2) != slices.Equal(in1, in2) {
			t.Fatalf("%q -> %q and %q -> %q", in1, s1, in2, s2)
		}
	})
}

// TestScopedKeyRandom is a property test over short strings from a small
// alphabet full of separators, where collisions of a naive encoding are
// frequent.
func TestScopedKeyRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", ":", "|", "1", "0", "a", "1:", "|1:"}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := map[string]string{}
	for range 20000 {
		key := "k" + word()
		scope := make([]string, rng.IntN(4))
		for i := range scope {
			scope[i] = word()
		}
		s, err := keyer.ScopedKey(key, scope...)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.Join(append(slices.Clone(scope), key), "\x00") + "\x00" + string(rune('0'+len(scope)))
		if prev, ok := seen[s]; ok && prev != id {
			t.Fatalf("collision on %q: %q and %q", s, prev, id)
		}
		seen[s] = id
	}
}

func TestScopedKeyLimits(t *testing.T) {
	if keyer.MaxStoreKeyLen != store.MaxKeyLen {
		t.Fatalf("keyer.MaxStoreKeyLen = %d, store.MaxKeyLen = %d", keyer.MaxStoreKeyLen, store.MaxKeyLen)
	}
	key := strings.Repeat("k", keyer.MaxKeyLen)
	// The largest scope that fits: one part of MaxScopeLen-5 bytes ("NNN:" + part + "|").
	part := strings.Repeat("s", keyer.MaxScopeLen-5)
	s, err := keyer.ScopedKey(key, part)
	if err != nil || len(s) > keyer.MaxStoreKeyLen || store.CheckKey(s) != nil {
		t.Fatalf("max scope with max key: len %d, %v", len(s), err)
	}
	if _, err := keyer.ScopedKey(key, part+"s"); !errors.Is(err, keyer.ErrBadScope) {
		t.Fatalf("scope one byte too long: %v, want ErrBadScope", err)
	}
	// The limit does not depend on the key's length.
	if _, err := keyer.ScopedKey("k", part+"s"); !errors.Is(err, keyer.ErrBadScope) {
		t.Fatalf("long scope with short key: %v, want ErrBadScope", err)
	}
	if _, err := keyer.ScopedKey("k", "a\x00b"); !errors.Is(err, keyer.ErrBadScope) {
		t.Fatalf("NUL in scope: %v", err)
	}
	if _, err := keyer.ScopedKey("k", "\xff"); !errors.Is(err, keyer.ErrBadScope) {
		t.Fatalf("invalid UTF-8 in scope: %v", err)
	}
	if _, err := keyer.ScopedKey(key+"k", "a"); !errors.Is(err, keyer.ErrMalformedKey) {
		t.Fatalf("key too long: %v", err)
	}
	if _, err := keyer.ScopedKey("", "a"); !errors.Is(err, keyer.ErrMalformedKey) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestScopedKeyOneAllocation: the key is built in one buffer that becomes
// the string (it runs on every request).
func TestScopedKeyOneAllocation(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		if _, err := keyer.ScopedKey("8e03978e-40d5-43e8-bc93-6894a57f9324", "acme", "alice"); err != nil {
			t.Fatal(err)
		}
	})
	if n != 1 {
		t.Fatalf("ScopedKey makes %v allocations, want 1", n)
	}
}

// TestTextNoNUL: the ASCII fast path agrees with utf8.ValidString and a
// search for NUL on every kind of input.
func TestTextNoNUL(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", "\x00", "é", "\xff", "\xc3", "€", "\x7f", "-"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		want := utf8.ValidString(s) && !strings.Contains(s, "\x00")
		_, err := keyer.ScopedKey("k", s)
		if got := err == nil; got != want {
			t.Fatalf("ScopedKey(\"k\", %q) err = %v, want valid = %v", s, err, want)
		}
		_, err = keyer.ScopedKey(s)
		if got := err == nil; got != (want && s != "") {
			t.Fatalf("ScopedKey(%q) err = %v, want valid = %v", s, err, want && s != "")
		}
	}
}
