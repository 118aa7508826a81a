package memory

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/idemkit/idemkit/internal/ascii"
	"github.com/idemkit/idemkit/store"
)

// scanPlain reports whether scan says s is plain ASCII.
func scanPlain(s string) bool { _, b := scan(s); return b&ascii.HiBits == 0 }

// accepts drops the hash from a fast check's answer.
func accepts(_ uint64, ok bool) bool { return ok }

// plainASCII is the definition scan must match: every byte in 1..0x7f.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// badSamples returns, for every length up to 40 and the lengths around the
// limits, a plain ASCII string and that string with each bad byte (NUL,
// 0x7f's neighbour 0x80, 0xff, the lead byte of a UTF-8 sequence) at every
// position.
func badSamples() []string {
	var out []string
	lengths := []int{store.MaxTokenLen - 1, store.MaxTokenLen, store.MaxTokenLen + 1, store.MaxKeyLen - 1, store.MaxKeyLen, store.MaxKeyLen + 1}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		b := []byte(strings.Repeat("a-Z~\x01\x7f9 ", n/8+1)[:n])
		out = append(out, string(b))
		if n > 64 {
			// Long strings: a bad byte near each end and in the middle.
			for _, i := range []int{0, 7, 8, n / 2, n - 9, n - 8, n - 1} {
				for _, c := range []byte{0, 0x80, 0xff, 0xc3} {
					b2 := append([]byte(nil), b...)
					b2[i] = c
					out = append(out, string(b2))
				}
			}
			continue
		}
		for i := range b {
			for _, c := range []byte{0, 0x80, 0xff, 0xc3} {
				b2 := append([]byte(nil), b...)
				b2[i] = c
				out = append(out, string(b2))
			}
		}
	}
	// Valid UTF-8 beyond ASCII: the store package accepts it, the fast
	// path leaves it to the store package.
	return append(out, "é", "key-é", "\U0001F600", strings.Repeat("ü", 20))
}

func TestScan(t *testing.T) {
	for _, s := range badSamples() {
		if got, want := scanPlain(s), plainASCII(s); got != want {
			t.Errorf("scan(%q) says plain ASCII %v, want %v", s, got, want)
		}
		if got, want := ascii.Bad(s)&ascii.HiBits == 0, plainASCII(s); got != want {
			t.Errorf("ascii.Bad(%q) says plain ASCII %v, want %v", s, got, want)
		}
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range badSamples() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := scanPlain(s), plainASCII(s); got != want {
			t.Errorf("scan(%q) says plain ASCII %v, want %v", s, got, want)
		}
		if got, want := ascii.Bad(s)&ascii.HiBits == 0, plainASCII(s); got != want {
			t.Errorf("ascii.Bad(%q) says plain ASCII %v, want %v", s, got, want)
		}
	})
}

// The fast checks accept exactly the plain ASCII arguments the store
// package accepts: never one it rejects (that would let bad input in), and
// every plain ASCII one it accepts (else the fast path would not be taken).
func TestFastChecksAgree(t *testing.T) {
	samples := badSamples()
	tok := store.NewToken()
	durations := []time.Duration{-time.Second, 0, 1, time.Minute}
	agree := func(what string, fast bool, err error, ascii bool) {
		t.Helper()
		if fast && err != nil {
			t.Errorf("%s: fast check accepts, store package says %v", what, err)
		}
		if !fast && err == nil && ascii {
			t.Errorf("%s: fast check rejects plain ASCII arguments the store package accepts", what)
		}
	}
	for _, s := range samples {
		for _, d := range durations {
			agree("claim key "+q(s), accepts(claimOK(s, "fp", tok, d)), store.CheckClaim(s, "fp", tok, d), plainASCII(s))
			agree("claim fingerprint "+q(s), accepts(claimOK("k", s, tok, d)), store.CheckClaim("k", s, tok, d), plainASCII(s))
			agree("claim token "+q(s), accepts(claimOK("k", "fp", store.Token(s), d)), store.CheckClaim("k", "fp", store.Token(s), d), plainASCII(s))
			agree("complete key "+q(s), accepts(completeOK(s, tok, d)), store.CheckComplete(s, tok, d), plainASCII(s))
			agree("complete token "+q(s), accepts(completeOK("k", store.Token(s), d)), store.CheckComplete("k", store.Token(s), d), plainASCII(s))
		}
		agree("release key "+q(s), accepts(releaseOK(s, tok)), store.CheckRelease(s, tok), plainASCII(s))
		agree("release token "+q(s), accepts(releaseOK("k", store.Token(s))), store.CheckRelease("k", store.Token(s)), plainASCII(s))
		agree("get key "+q(s), accepts(keyOK(s)), store.CheckKey(s), plainASCII(s))
	}
}

func FuzzFastChecksAgree(f *testing.F) {
	f.Add("key-1", "fp", "TOKEN", int64(time.Minute))
	f.Add("", "", "", int64(0))
	f.Add("k\x00", "f\xff", "t\x80", int64(-1))
	f.Fuzz(func(t *testing.T, key, fp, tok string, d int64) {
		check := func(what string, fast bool, err error) {
			if fast && err != nil {
				t.Errorf("%s(%q, %q, %q, %d): fast check accepts, store package says %v", what, key, fp, tok, d, err)
			}
		}
		check("claim", accepts(claimOK(key, fp, store.Token(tok), time.Duration(d))), store.CheckClaim(key, fp, store.Token(tok), time.Duration(d)))
		check("complete", accepts(completeOK(key, store.Token(tok), time.Duration(d))), store.CheckComplete(key, store.Token(tok), time.Duration(d)))
		check("release", accepts(releaseOK(key, store.Token(tok))), store.CheckRelease(key, store.Token(tok)))
		check("get", accepts(keyOK(key)), store.CheckKey(key))
	})
}

// q quotes s for a message, cut to its first 24 characters.
func q(s string) string { return fmt.Sprintf("%.24q", s) }

// The hash spreads keys of the usual shapes evenly over the shards: for
// each shape, 64Ki keys put between half and one and a half times the mean
// in every shard.
func TestShardSpread(t *testing.T) {
	shapes := map[string]func(i int) string{
		"counter": func(i int) string { return "key-" + strconv.Itoa(i) },
		"short": func(i int) string {
			return string(rune('!'+i%90)) + string(rune('!'+i/90%90)) + string(rune('!'+i/8100))
		},
		"uuid":      func(i int) string { return fmt.Sprintf("tenant-7:%08x-4a2b-9c1d-%012x", i*2654435761%(1<<32), i) },
		"long tail": func(i int) string { return strings.Repeat("scope/", 9) + strconv.Itoa(i) },
		"token":     func(i int) string { return string(store.NewToken()) },
	}
	const n = 1 << 16
	for name, key := range shapes {
		var count [numShards]int
		for i := range n {
			h, _ := scan(key(i))
			count[h>>(64-shardBits)]++
		}
		lo, hi := n/numShards/2, n/numShards*3/2
		for sh, c := range count {
			if c < lo || c > hi {
				t.Errorf("%s keys: shard %d holds %d of %d, want %d..%d", name, sh, c, n, lo, hi)
				break
			}
		}
	}
}

// Each shard fills one 64-byte cache line, so two cores working on
// neighbouring shards never write to one line.
func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != 64 {
		t.Errorf("a shard is %d bytes, want 64 (one cache line)", got)
	}
	if off := unsafe.Offsetof(Store{}.shards); off%64 != 0 {
		t.Errorf("shards start at offset %d of a Store, want a multiple of 64", off)
	}
}
