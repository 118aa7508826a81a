package store_test

import (
	"errors"
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
			if want := "store: invalid argument: " + tt.wantMsg; tt.err.Error() != want {
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
