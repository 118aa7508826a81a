package storetest

import (
	"bytes"
	"math/rand/v2"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// The Strings cases feed keys, fingerprints, tokens and responses in the
// shapes storage engines mangle: case-insensitive or space-padding
// collations, Unicode normalisation, columns that truncate, prefix indexes,
// text columns that re-encode bytes. Every value must come back distinct and
// byte-exact. (In the spirit of go-cloud's drivertest WeirdStrings.)

var stringsCases = []testCase{
	{"KeysCase", func(e *env) {
		e.distinctKeys("differing only by case", []string{
			"key", "Key", "KEY", "kEy",
			"i", "I", "\u0131", "\u0130", // dotless ı and dotted İ (Turkish folding)
			"stra\u00dfe", "strasse", "STRASSE", // ß and its folding
			"\u00e9", "\u00c9", // é, É
		})
	}},
	{"KeysSpaces", func(e *env) {
		e.distinctKeys("differing only by spaces", []string{
			"key", "key ", "key  ", " key", "  key", " key ", "k ey",
			"key\t", "key\n", "key\r\n", "key\u00a0", "key\u3000", // tab, newlines, no-break and ideographic spaces
			" ", "  ", "\t",
		})
	}},
	{"KeysUnicodeForms", func(e *env) {
		e.distinctKeys("differing only by Unicode normalisation form", []string{
			"caf\u00e9", "cafe\u0301", // NFC é and NFD e + combining acute
			"\u00c5", "A\u030a", "\u212b", // Å: NFC, NFD, and the Angstrom sign
			"\ufb01", "fi", // the ﬁ ligature (NFKC: fi)
			"\uff21", "A", // fullwidth Ａ (NFKC: A)
			"\u1e9b\u0323", "\u017f\u0323\u0307", // ẛ̣ in two forms
			"\U0001F600", "\U0001F601", "\u263a", // 4-byte UTF-8 (3-byte "utf8" columns lose them), and a 3-byte one
			"\ufeffkey", "key\u200b", "key", // a byte-order mark, a zero-width space
		})
	}},
	{"KeysMaxLength", func(e *env) {
		n := e.h.MaxKeyLen
		base := strings.Repeat("k", n-1)
		wide := strings.Repeat("\u00e9", n/2) // 2-byte characters up to the limit
		e.distinctKeys("at the maximum length differing only in the last byte", []string{
			base + "a", base + "b", base + "A", base, base[:n-2] + "é",
			wide, wide[:len(wide)-2] + "ea", wide[:len(wide)-2] + "eb", wide[:len(wide)-2] + "e",
		})
	}},
	{"KeysLongPrefix", func(e *env) {
		// Engines that index or compare only a prefix of a column
		// (varchar(255), prefix indexes of 767 or 1000 bytes) fold these.
		//
		// A rule for backend authors that no test can check from outside:
		// a store that finds keys by a hash of the key (to fit long keys
		// in an index, or to spread them) must still compare the whole
		// key, or use the whole of a cryptographic hash of at least 128
		// bits as the key. A hash cut to 32 or 64 bits makes two keys one
		// record once enough keys exist, and one request is then replayed
		// the other's response; no black-box test finds the colliding
		// pair.
		var keys []string
		for _, n := range []int{64, 191, 255, 256, 767, 768, 1000} {
			if n+1 > e.h.MaxKeyLen {
				continue
			}
			p := longPrefix(n)
			keys = append(keys, p+"a", p+"b")
			if n+2 <= e.h.MaxKeyLen {
				keys = append(keys, p+"ab")
			}
		}
		keys = append(keys, longPrefix(e.h.MaxKeyLen-1))
		e.distinctKeys("sharing a long prefix", keys)
	}},
	{"FingerprintsDistinct", func(e *env) {
		n := e.h.MaxFingerprintLen
		fps := []string{
			strings.Repeat("f", n-1) + "a", strings.Repeat("f", n-1) + "b", strings.Repeat("f", n-1),
			longPrefix(255) + "x", longPrefix(255) + "y",
			"fp", "FP", "fp ", " fp", "caf\u00e9", "cafe\u0301", "",
		}
		for i, fp := range fps {
			key := "fp-" + itoa(i)
			holder := store.NewToken()
			c := e.claimWant(key, fp, holder, long, store.Acquired)
			if c.Record.Fingerprint != fp {
				e.Errorf("Claim: Record.Fingerprint = %s, want the %d-byte %s byte for byte", short([]byte(c.Record.Fingerprint)), len(fp), short([]byte(fp)))
			}
			for j, other := range fps {
				if j == i {
					continue
				}
				c := e.claim(key, other, store.NewToken(), long)
				if c.Outcome != store.Mismatch {
					e.Fatalf("Claim(%q) with fingerprint %s of a key claimed with %s: %v, want mismatch (the fingerprints differ)", key, short([]byte(other)), short([]byte(fp)), c.Outcome)
				}
			}
			e.claimWant(key, fp, store.NewToken(), long, store.InProgress)
			r := e.wantInProgress(key, fp, holder)
			if r.Fingerprint != fp {
				e.Errorf("Get: Fingerprint = %s, want %s byte for byte", short([]byte(r.Fingerprint)), short([]byte(fp)))
			}
		}
	}},
	{"TokensDistinct", func(e *env) {
		// A token compared case-insensitively, with trailing spaces
		// ignored, or by a prefix (a column or an index shorter than
		// store.MaxTokenLen) lets another claim complete or release the
		// holder's key.
		base := "Token-" + string(store.NewToken())
		e.distinctTokens("short", store.Token(base), []store.Token{
			store.Token(strings.ToLower(base)), store.Token(strings.ToUpper(base)),
			store.Token(base + " "), store.Token(" " + base), store.Token(base[:len(base)-1]),
			store.Token(base + "\u0301"),
		})
		long := strings.Repeat("t", store.MaxTokenLen-len(base)) + base // store.MaxTokenLen bytes
		e.distinctTokens("long", store.Token(long), []store.Token{
			store.Token(long[:len(long)-1] + "x"), store.Token(long[:len(long)-1]),
			store.Token(long[:64]), store.Token(long[:64] + "x"), store.Token(long[:100] + "Y" + long[101:]),
		})
	}},
	{"ResponsesEveryByte", func(e *env) {
		every := make([]byte, 0, 512)
		for i := 0; i < 256; i++ {
			every = append(every, byte(i))
		}
		for i := 255; i >= 0; i-- {
			every = append(every, byte(i))
		}
		resps := [][]byte{
			every,
			{0}, {0, 0, 0}, {0xff}, {0xc3}, {0xc3, 0x28}, {0xed, 0xa0, 0x80}, // NUL, invalid UTF-8, a surrogate
			[]byte("\xef\xbb\xbfBOM"), []byte("trailing spaces   "), []byte("   "), []byte("\\x00\\'"),
			[]byte("caf\u00e9"), []byte("cafe\u0301"), // normalisation must not touch bytes either
			{},
		}
		for i, resp := range resps {
			key := "resp-" + itoa(i)
			tok := store.NewToken()
			e.claimWant(key, "fp", tok, long, store.Acquired)
			e.mustComplete(key, tok, resp, long)
		}
		for i, resp := range resps {
			key := "resp-" + itoa(i)
			r := e.get(key)
			if !bytes.Equal(r.Response, resp) {
				e.Errorf("Get(%q): Response = %s (%d bytes), want %s (%d bytes) byte for byte", key, short(r.Response), len(r.Response), short(resp), len(resp))
			}
			c := e.claimWant(key, "fp", store.NewToken(), long, store.Completed)
			if !bytes.Equal(c.Record.Response, resp) {
				e.Errorf("replay of %q: Response = %s, want %s byte for byte", key, short(c.Record.Response), short(resp))
			}
		}
	}},
	{"ResponseSeveralMiB", func(e *env) {
		// Incompressible bytes of every value, so no engine can store it
		// as short text or a compressed run.
		big := make([]byte, 4<<20+3)
		_, _ = rand.NewChaCha8([32]byte{1, 2}).Read(big) // never fails
		tok := store.NewToken()
		e.claimWant("big", "fp", tok, long, store.Acquired)
		if err := e.complete("big", tok, big, long); err != nil {
			e.Fatalf("Complete with a %d-byte response: %v", len(big), err)
		}
		c := e.claimWant("big", "fp", store.NewToken(), long, store.Completed)
		if !bytes.Equal(c.Record.Response, big) {
			e.Errorf("replay of a %d-byte response: got %d bytes that differ (first difference at byte %d)", len(big), len(c.Record.Response), firstDiff(c.Record.Response, big))
		}
		if r := e.get("big"); !bytes.Equal(r.Response, big) {
			e.Errorf("Get of a %d-byte response: got %d bytes that differ (first difference at byte %d)", len(big), len(r.Response), firstDiff(r.Response, big))
		}
	}},
}

// distinctTokens has holder claim a key of its own (named after what) and
// checks that none of others, tokens that differ from it, is taken for it:
// each sees the key in progress, cannot complete it, and releases nothing.
func (e *env) distinctTokens(what string, holder store.Token, others []store.Token) {
	e.Helper()
	key := "tokens-" + what
	e.claimWant(key, "fp", holder, long, store.Acquired)
	for _, o := range others {
		c := e.claim(key, "fp", o, long)
		if c.Outcome != store.InProgress || c.Record.Token != holder {
			e.Fatalf("Claim by token %s of a key held by %s: %v %s, want in progress held by %s (the tokens differ)", qs(string(o)), qs(string(holder)), c.Outcome, describe(c.Record), qs(string(holder)))
		}
		e.wantLeaseLost(e.complete(key, o, []byte("by "+string(o)), long), "Complete by token "+qs(string(o))+" of a key held by "+qs(string(holder)))
		e.mustRelease(key, o)
		e.wantInProgress(key, "fp", holder)
	}
	e.mustComplete(key, holder, []byte("by the holder"), long)
	for _, o := range others {
		e.mustRelease(key, o)
	}
	r := e.wantCompleted(key, "fp", holder, []byte("by the holder"))
	if r.Token != holder {
		e.Errorf("Get: Token = %s, want %s byte for byte", qs(string(r.Token)), qs(string(holder)))
	}
}

// distinctKeys claims every key with its own token and checks that each is
// its own record, returned byte for byte as given: no two keys may reach
// the same record, and no key may come back altered.
func (e *env) distinctKeys(what string, keys []string) {
	e.Helper()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			e.Fatalf("storetest: internal error: key %s listed twice", qs(k))
		}
		seen[k] = true
		if err := store.CheckKey(k); err != nil || len(k) > e.h.MaxKeyLen {
			e.Fatalf("storetest: internal error: key %s is not valid: %v", qs(k), err)
		}
	}
	toks := tokens(len(keys))
	holder := map[store.Token]string{}
	for i, k := range keys {
		holder[toks[i]] = k
		c := e.claim(k, "fp", toks[i], long)
		if c.Outcome != store.Acquired {
			e.Fatalf("keys %s: Claim(%s) of a never-claimed key: %v, held by the claim of key %s; the store took two keys for one",
				what, qs(k), c.Outcome, qs(holder[c.Record.Token]))
		}
		if c.Record.Key != k {
			e.Errorf("keys %s: Claim(%s): Record.Key = %s, want it byte for byte", what, qs(k), qs(c.Record.Key))
		}
	}
	for i, k := range keys {
		r := e.get(k)
		if r.Token != toks[i] {
			e.Fatalf("keys %s: Get(%s) returned the record of key %s", what, qs(k), qs(holder[r.Token]))
		}
		e.mustComplete(k, toks[i], []byte(k), long)
	}
	for i, k := range keys {
		c := e.claim(k, "fp", store.NewToken(), long)
		if c.Outcome != store.Completed || c.Record.Token != toks[i] || string(c.Record.Response) != k || c.Record.Key != k {
			e.Errorf("keys %s: replay of %s = %v %s (key %s), want its own record completed with its own key as response",
				what, qs(k), c.Outcome, describe(c.Record), qs(c.Record.Key))
		}
	}
}

// longPrefix returns n bytes of printable, varied text, the same for the
// same n, so that keys built on it share exactly n bytes.
func longPrefix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_:/.ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[(i*7+i/len(alphabet))%len(alphabet)]
	}
	return string(b)
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
