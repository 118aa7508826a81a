package store_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

func TestNewToken(t *testing.T) {
	seen := map[store.Token]bool{}
	for i := 0; i < 1000; i++ {
		tok := store.NewToken()
		if len(tok) < 22 || len(tok) > store.MaxTokenLen {
			t.Fatalf("NewToken() = %q: length %d, want 22..%d", tok, len(tok), store.MaxTokenLen)
		}
		if err := store.CheckRelease("k", tok); err != nil {
			t.Fatalf("NewToken() = %q is not a valid token: %v", tok, err)
		}
		if seen[tok] {
			t.Fatalf("NewToken() repeated %q", tok)
		}
		seen[tok] = true
	}
}

func TestChecks(t *testing.T) {
	tok := store.NewToken()
	long := strings.Repeat("k", store.MaxKeyLen)
	tests := []struct {
		name    string
		err     error
		wantMsg string // empty: valid
	}{
		{"claim ok", store.CheckClaim("k", "fp", tok, time.Second), ""},
		{"claim empty fingerprint ok", store.CheckClaim("k", "", tok, time.Nanosecond), ""},
		{"claim longest key ok", store.CheckClaim(long, "fp", tok, time.Second), ""},
		{"claim unicode key ok", store.CheckClaim("chave-ã-键", "fp", tok, time.Second), ""},
		{"claim empty key", store.CheckClaim("", "fp", tok, time.Second), "empty key"},
		{"claim long key", store.CheckClaim(long+"k", "fp", tok, time.Second), "key is 1025 bytes, longer than 1024"},
		{"claim NUL key", store.CheckClaim("a\x00b", "fp", tok, time.Second), "key contains a NUL byte"},
		{"claim bad UTF-8", store.CheckClaim("a\xc3", "fp", tok, time.Second), "key is not valid UTF-8"},
		{"claim NUL fingerprint", store.CheckClaim("k", "f\x00", tok, time.Second), "fingerprint contains a NUL byte"},
		{"claim empty token", store.CheckClaim("k", "fp", "", time.Second), "empty token"},
		{"claim zero lease", store.CheckClaim("k", "fp", tok, 0), "lease 0s is not positive"},
		{"claim negative lease", store.CheckClaim("k", "fp", tok, -time.Second), "lease -1s is not positive"},
		{"complete ok", store.CheckComplete("k", tok, time.Hour), ""},
		{"complete zero retention", store.CheckComplete("k", tok, 0), "retention 0s is not positive"},
		{"complete empty token", store.CheckComplete("k", "", time.Hour), "empty token"},
		{"release ok", store.CheckRelease("k", tok), ""},
		{"release long token", store.CheckRelease("k", store.Token(strings.Repeat("t", 129))), "token is 129 bytes, longer than 128"},
		{"get empty key", store.CheckKey(""), "empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantMsg == "" {
				if tt.err != nil {
					t.Fatalf("got %v, want nil", tt.err)
				}
				return
			}
			if !errors.Is(tt.err, store.ErrInvalid) {
				t.Fatalf("got %v, want an error matching ErrInvalid", tt.err)
			}
			if want := "invalid argument: " + tt.wantMsg; tt.err.Error() != want {
				t.Errorf("message %q, want %q", tt.err.Error(), want)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{store.StatusInProgress.String(), "in progress"},
		{store.StatusCompleted.String(), "completed"},
		{store.Status(9).String(), "Status(9)"},
		{store.Acquired.String(), "acquired"},
		{store.Completed.String(), "completed"},
		{store.InProgress.String(), "in progress"},
		{store.Mismatch.String(), "mismatch"},
		{store.Outcome(0).String(), "Outcome(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}

// TestNewTokenBits checks that every one of the 128 bits varies: a
// token's 26 characters carry 130 bits, the first two always zero, so the
// first character (3 bits) is one of A-H and every other position takes all
// 32 values over enough tokens.
func TestNewTokenBits(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var seen [26][32]bool
	for range 4000 {
		tok := store.NewToken()
		if len(tok) != 26 {
			t.Fatalf("NewToken() = %q: %d characters, want 26", tok, len(tok))
		}
		for i := range len(tok) {
			j := strings.IndexByte(alphabet, tok[i])
			if j < 0 {
				t.Fatalf("NewToken() = %q: %q is not base32", tok, tok[i])
			}
			seen[i][j] = true
		}
	}
	for i := range seen {
		want := 32
		if i == 0 {
			want = 8
		}
		n := 0
		for j, ok := range seen[i] {
			if ok {
				n++
			} else if j < want {
				t.Errorf("position %d never took %q", i, alphabet[j])
			}
		}
		if n != want {
			t.Errorf("position %d took %d distinct values, want %d", i, n, want)
		}
	}
}

// TestNewTokenConcurrent draws tokens on many goroutines at once (the
// generator keeps a state per thread) and finds no repeat.
func TestNewTokenConcurrent(t *testing.T) {
	const goroutines, each = 8, 2000
	out := make(chan []store.Token, goroutines)
	for range goroutines {
		go func() {
			ts := make([]store.Token, each)
			for i := range ts {
				ts[i] = store.NewToken()
			}
			out <- ts
		}()
	}
	seen := map[store.Token]bool{}
	for range goroutines {
		for _, tok := range <-out {
			if seen[tok] {
				t.Fatalf("NewToken() repeated %q", tok)
			}
			seen[tok] = true
		}
	}
}

// TestNewTokenAcrossProcesses runs this test binary twice more, each
// printing tokens, and checks that the processes share none: each process
// keys its generator from the system's entropy, so none repeats another's
// sequence.
func TestNewTokenAcrossProcesses(t *testing.T) {
	if os.Getenv("IDEMKIT_PRINT_TOKENS") == "1" {
		for range 500 {
			fmt.Println(store.NewToken())
		}
		return
	}
	seen := map[string]int{}
	for p := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNewTokenAcrossProcesses$")
		cmd.Env = append(os.Environ(), "IDEMKIT_PRINT_TOKENS=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child process: %v", err)
		}
		n := 0
		for _, line := range strings.Fields(string(out)) {
			if len(line) != 26 {
				continue // the test runner's own lines
			}
			if q, dup := seen[line]; dup {
				t.Fatalf("token %s from process %d repeats one from process %d", line, p, q)
			}
			seen[line] = p
			n++
		}
		if n != 500 {
			t.Fatalf("child process %d printed %d tokens, want 500", p, n)
		}
	}
}

// TestChecksEveryPosition puts a NUL, a byte of invalid UTF-8 and a valid
// multi-byte character at every position of keys of several lengths (the
// check reads eight bytes at a time): the first two are rejected wherever
// they are, the third accepted.
func TestChecksEveryPosition(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for i := range n {
			base := []byte(strings.Repeat("k", n))
			for _, c := range []struct {
				name string
				put  string
				ok   bool
			}{{"NUL", "\x00", false}, {"invalid UTF-8", "\xff", false}, {"é", "é", true}} {
				key := string(base[:i]) + c.put + string(base[i+1:])
				err := store.CheckKey(key)
				if c.ok && err != nil {
					t.Errorf("CheckKey(%q) = %v, want nil", key, err)
				}
				if !c.ok && !errors.Is(err, store.ErrInvalid) {
					t.Errorf("CheckKey(%q) with %s at %d = %v, want ErrInvalid", key, c.name, i, err)
				}
			}
		}
	}
}
