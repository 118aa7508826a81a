package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/ascii"
)

// The checks as they were before their fast paths (git show
// 540bf74:store/check.go), the reference the fast paths must agree with
// word for word: refPlainASCII by definition, byte by byte.

func refCheckClaim(key, fingerprint string, token Token, lease time.Duration) error {
	if err := refCheckKeyToken(key, token); err != nil {
		return err
	}
	if err := refCheckText("fingerprint", fingerprint, MaxFingerprintLen, true); err != nil {
		return err
	}
	return checkDuration("lease", lease)
}

func refCheckComplete(key string, token Token, retention time.Duration) error {
	if err := refCheckKeyToken(key, token); err != nil {
		return err
	}
	return checkDuration("retention", retention)
}

func refCheckRenew(key string, token Token, lease time.Duration) error {
	if err := refCheckKeyToken(key, token); err != nil {
		return err
	}
	return checkDuration("lease", lease)
}

func refCheckKeyToken(key string, token Token) error {
	if err := refCheckText("key", key, MaxKeyLen, false); err != nil {
		return err
	}
	return refCheckText("token", string(token), MaxTokenLen, false)
}

func refCheckText(what, s string, max int, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

func refPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// samples returns, for every length up to 40 and the lengths around the
// limits, a plain ASCII string (every byte value 1..0x7f appears in one)
// and that string with each bad byte (NUL, 0x80, 0xff, a UTF-8 lead byte)
// at every position, then valid UTF-8 beyond ASCII.
func samples() []string {
	var ascii strings.Builder
	for c := 1; c < 0x80; c++ {
		ascii.WriteByte(byte(c))
	}
	all := ascii.String()
	var out []string
	lengths := []int{63, 64, 65, 127, 128, 129, MaxKeyLen - 1, MaxKeyLen, MaxKeyLen + 1}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		b := []byte(strings.Repeat(all, n/len(all)+1)[:n])
		out = append(out, string(b))
		positions := make([]int, 0, n)
		if n > 64 {
			positions = append(positions, 0, 7, 8, 15, 16, n/2, n-9, n-8, n-7, n-1)
		} else {
			for i := range n {
				positions = append(positions, i)
			}
		}
		for _, i := range positions {
			for _, c := range []byte{0, 0x80, 0xff, 0xc3, 0x7f + 1} {
				b2 := append([]byte(nil), b...)
				b2[i] = c
				out = append(out, string(b2))
			}
		}
	}
	// Plain ASCII bytes that sit next to a zero or high byte in a word
	// (borrows and carries between bytes).
	out = append(out, "\x01\x00\x01\x01\x01\x01\x01\x01", "\x7f\x7f\x7f\x00\x7f\x7f\x7f\x7f", "\x00\xff\x00\xff", "\x80\x00", "a\x00b")
	return append(out, "é", "key-é", "\U0001F600", strings.Repeat("ü", 20), "\xed\xa0\x80", "\xc3")
}

// ascii.Bad says a string is plain ASCII exactly when the byte-by-byte
// definition does.
func TestBadBytes(t *testing.T) {
	for _, s := range samples() {
		if got, want := ascii.Plain(s), refPlainASCII(s); got != want {
			t.Errorf("ascii.Plain(%q) = %v, want %v", s, got, want)
		}
		// And within a combination: one bad string among good ones.
		if got, want := (ascii.Bad("ok")|ascii.Bad(s)|ascii.Bad(strings.Repeat("x", 20)))&ascii.HiBits == 0, refPlainASCII(s); got != want {
			t.Errorf("badBytes of %q among good strings says plain %v, want %v", s, got, want)
		}
	}
}

// agree checks one set of arguments: every check returns what the
// reference returns, the same error word for word or nil, so the fast
// paths never accept what the full checks reject, and they leave nothing to
// the full checks that is plain ASCII and valid (each check's fast path is
// taken exactly when it should be, so its cost is what the benchmarks see).
func agree(t *testing.T, key, fp, tok string, d time.Duration) {
	t.Helper()
	same := func(what string, got, want error) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s(%q, %q, %q, %v) = %v, want %v", what, key, fp, tok, d, got, want)
		}
	}
	same("CheckClaim", CheckClaim(key, fp, Token(tok), d), refCheckClaim(key, fp, Token(tok), d))
	same("CheckComplete", CheckComplete(key, Token(tok), d), refCheckComplete(key, Token(tok), d))
	same("CheckRenew", CheckRenew(key, Token(tok), d), refCheckRenew(key, Token(tok), d))
	same("CheckRelease", CheckRelease(key, Token(tok)), refCheckKeyToken(key, Token(tok)))
	same("CheckKey", CheckKey(key), refCheckText("key", key, MaxKeyLen, false))
	fast := keyTokenLenOK(key, Token(tok)) && len(fp) <= MaxFingerprintLen && d > 0 &&
		(ascii.Bad(key)|ascii.Bad(fp)|ascii.Bad(tok))&ascii.HiBits == 0
	if want := refCheckClaim(key, fp, Token(tok), d) == nil && refPlainASCII(key+fp+tok); fast != want {
		t.Errorf("CheckClaim(%q, %q, %q, %v): fast path taken %v, want %v", key, fp, tok, d, fast, want)
	}
}

func TestCheckFastPath(t *testing.T) {
	tok := string(NewToken())
	for _, s := range samples() {
		for _, d := range []time.Duration{-time.Second, 0, 1, time.Minute} {
			agree(t, s, "fp", tok, d)
			agree(t, "key", s, tok, d)
			agree(t, "key", "fp", s, d)
		}
	}
	long := func(n int) string { return strings.Repeat("k", n) }
	for _, n := range []int{MaxKeyLen - 1, MaxKeyLen, MaxKeyLen + 1} {
		agree(t, long(n), long(MaxFingerprintLen), long(MaxTokenLen), time.Minute)
		agree(t, "key", long(n), tok, time.Minute)
	}
	agree(t, "key", "fp", long(MaxTokenLen+1), time.Minute)
	agree(t, "", "", "", 0)
}

func FuzzCheckFastPath(f *testing.F) {
	f.Add("key-1", "fp", "TOKEN", int64(time.Minute))
	f.Add("", "", "", int64(0))
	f.Add("k\x00", "f\xff", "t\x80", int64(-1))
	f.Add("replay-123", "3f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", int64(time.Minute))
	f.Add("é", "ü\x00", "\U0001F600", int64(1))
	f.Fuzz(func(t *testing.T, key, fp, tok string, d int64) {
		agree(t, key, fp, tok, time.Duration(d))
		if got, want := ascii.Plain(key), refPlainASCII(key); got != want {
			t.Errorf("ascii.Plain(%q) = %v, want %v", key, got, want)
		}
	})
}
