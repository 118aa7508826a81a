package redis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

func TestCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 4_000_000, time.UTC).UnixMilli()
	tok := store.NewToken()
	cases := []struct {
		name     string
		status   byte
		token    store.Token
		fp       string
		at       int64
		response []byte
	}{
		{"in progress", statusInProgress, tok, "fp", at, nil},
		{"in progress, empty fingerprint", statusInProgress, tok, "", at, nil},
		{"in progress, longest token and fingerprint", statusInProgress,
			store.Token(strings.Repeat("t", store.MaxTokenLen)), strings.Repeat("é", store.MaxFingerprintLen/2), at, nil},
		{"completed", statusCompleted, tok, "fp", at, []byte(`{"id":1}`)},
		{"completed, empty response", statusCompleted, tok, "fp", at, nil},
		{"completed, binary response", statusCompleted, tok, "fp", at, []byte{0, 1, 0xff, 0}},
		{"time before 1970", statusCompleted, tok, "fp", -1, []byte("r")},
		{"zero time.Time", statusInProgress, tok, "fp", time.Time{}.UnixMilli(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := encode(c.status, c.token, c.fp, c.at, 7, 1<<63+5, c.response)
			assert.Len(t, v, headerSize+len(c.token)+len(c.fp)+len(c.response), "encoded size")
			r, err := decode("key", v)
			require.NoError(t, err)
			assert.Equal(t, uint32(7), r.Attempt)
			assert.Equal(t, uint64(1<<63+5), r.Fence)
			assert.Equal(t, "key", r.Key)
			assert.Equal(t, c.token, r.Token)
			assert.Equal(t, c.fp, r.Fingerprint)
			assert.Equal(t, c.at, r.ExpiresAt.UnixMilli())
			if c.status == statusInProgress {
				assert.Equal(t, store.StatusInProgress, r.Status)
				assert.True(t, r.LockedUntil.Equal(r.ExpiresAt), "LockedUntil %v != ExpiresAt %v", r.LockedUntil, r.ExpiresAt)
				assert.Nil(t, r.Response)
			} else {
				assert.Equal(t, store.StatusCompleted, r.Status)
				assert.True(t, r.LockedUntil.IsZero())
				assert.True(t, bytes.Equal(c.response, r.Response), "response %q, want %q", r.Response, c.response)
			}
		})
	}
}

func TestCodecTimeField(t *testing.T) {
	v := encode(statusInProgress, "tok", "fp", 0x0102030405060708, 1, 1, nil)
	assert.Equal(t, encodeTime(0x0102030405060708), v[offTime:offTime+8])
	assert.Equal(t, "\x01\x02\x03\x04\x05\x06\x07\x08", encodeTime(0x0102030405060708))
}

func TestDecodeRejects(t *testing.T) {
	valid := encode(statusCompleted, "tok", "fp", 1, 1, 1, []byte("resp"))
	set := func(i int, b byte) string { s := []byte(valid); s[i] = b; return string(s) }
	cases := map[string]string{
		"empty":                        "",
		"plain text":                   "hello, world",
		"JSON":                         `{"status":"completed","token":"x"}`,
		"header only, cut":             valid[:headerSize-1],
		"version 0":                    set(0, 0),
		"version 3":                    set(0, 3),
		"status 0":                     set(offStatus, 0),
		"status 3":                     set(offStatus, 3),
		"empty token":                  set(offTokLen, 0),
		"token longer than the value":  set(offTokLen, 200),
		"fingerprint over the limit":   set(offFPLen, 0xff),
		"fingerprint past the end":     set(offFPLen+1, 0x40),
		"in progress with a response":  set(offStatus, statusInProgress),
		"token not UTF-8":              set(headerSize, 0xff),
		"token with NUL":               set(headerSize, 0),
		"fingerprint not UTF-8":        set(headerSize+3, 0xc3),
		"cut inside the fingerprint":   valid[:headerSize+4],
		"token over MaxTokenLen":       encode(statusInProgress, store.Token(strings.Repeat("t", 129)), "", 1, 1, 1, nil),
		"fingerprint over the maximum": encode(statusInProgress, "t", strings.Repeat("f", store.MaxFingerprintLen+1), 1, 1, 1, nil),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decode("key", v)
			require.Error(t, err)
			assert.True(t, errors.Is(err, errCorrupt), "error %v does not wrap errCorrupt", err)
			for _, s := range []error{store.ErrNotFound, store.ErrLeaseLost, store.ErrInvalid} {
				assert.False(t, errors.Is(err, s), "error %v matches %v", err, s)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		time.Nanosecond:                         1,
		time.Microsecond:                        1,
		time.Millisecond:                        1,
		time.Millisecond + 1:                    2,
		1500 * time.Microsecond:                 2,
		time.Second:                             1000,
		time.Duration(1<<63 - 1):                9223372036855,
		time.Duration(1<<63-1) / 1e6 * 1e6:      9223372036854,
		30*time.Second + 999999*time.Nanosecond: 30001,
	} {
		assert.Equal(t, want, millis(d), "millis(%v)", d)
	}
}

// FuzzDecode feeds the decoder arbitrary bytes. It must never panic, and
// whatever it accepts must be a record that encodes back to the very same
// bytes (the encoding is canonical) and obeys the store's limits.
// Seeds: the f.Add calls below and testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	tok := store.Token("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	f.Add([]byte(encode(statusInProgress, tok, "fp", 1_764_464_523_004, 1, 1, nil)))
	f.Add([]byte(encode(statusInProgress, tok, "", 0, 1, 1, nil)))
	f.Add([]byte(encode(statusCompleted, tok, "sha256:abc", 1_764_464_523_004, 1, 1, []byte(`{"id":1}`))))
	f.Add([]byte(encode(statusCompleted, "t", "é", -5, 1, 1, []byte{0, 0xff})))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("not an idemkit record at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode("k", string(b))
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decode error %v does not wrap errCorrupt", err)
			}
			return
		}
		if r.Key != "k" {
			t.Fatalf("Key = %q", r.Key)
		}
		if err := store.CheckClaim("k", r.Fingerprint, r.Token, time.Second); err != nil {
			t.Fatalf("decoded a record the store would refuse: %v", err)
		}
		var status byte
		switch r.Status {
		case store.StatusInProgress:
			status = statusInProgress
			if !r.LockedUntil.Equal(r.ExpiresAt) || r.Response != nil {
				t.Fatalf("in progress: %+v", r)
			}
		case store.StatusCompleted:
			status = statusCompleted
			if !r.LockedUntil.IsZero() || r.Response == nil {
				t.Fatalf("completed: %+v", r)
			}
		default:
			t.Fatalf("status %v", r.Status)
		}
		again := encode(status, r.Token, r.Fingerprint, r.ExpiresAt.UnixMilli(), r.Attempt, r.Fence, r.Response)
		if b[0] == codecV1 {
			if r.Attempt != 0 || r.Fence != 0 {
				t.Fatalf("a version-1 value decoded with Attempt %d, Fence %d", r.Attempt, r.Fence)
			}
			again = encodeV1(status, r.Token, r.Fingerprint, r.ExpiresAt.UnixMilli(), r.Response)
		}
		if again != string(b) {
			t.Fatalf("decode then encode changed the value:\n got %q\nwant %q", again, b)
		}
	})
}

// TestDecodeReplyShares: decodeReply returns a completed record whose
// Response shares the reply's bytes (no copy: no allocation even for 1
// MiB), and writing into that Response leaves Token and Fingerprint as
// they were. decode, for values of unknown origin, still copies.
func TestDecodeReplyShares(t *testing.T) {
	tok := store.Token("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	resp := bytes.Repeat([]byte("r"), 1<<20)
	v := encode(statusCompleted, tok, "fp", 1_764_464_523_004, 1, 1, resp)
	reply := func() string { return string([]byte(v)) } // a fresh buffer, as go-redis reads one

	r := reply()
	if n := testing.AllocsPerRun(20, func() {
		if _, err := decodeReply("k", r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decodeReply of a 1 MiB value: %.0f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, err := decode("k", r); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("decode of a 1 MiB value: %.0f allocations, want 1 (the copy)", n)
	}

	rec, err := decodeReply("k", reply())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Response, resp) {
		t.Fatal("Response differs")
	}
	for i := range rec.Response {
		rec.Response[i] = 'x'
	}
	if rec.Token != tok || rec.Fingerprint != "fp" {
		t.Fatalf("writing the Response changed Token %q or Fingerprint %q", rec.Token, rec.Fingerprint)
	}

	empty, err := decodeReply("k", string([]byte(encode(statusCompleted, tok, "fp", 1, 1, 1, nil))))
	if err != nil || empty.Response == nil || len(empty.Response) != 0 {
		t.Fatalf("completed with an empty response: %v, %#v", err, empty.Response)
	}
}

// encodeV1 returns the value of version 1, the layout before Attempt and
// Fence, that earlier releases wrote for a record.
func encodeV1(status byte, token store.Token, fingerprint string, at int64, response []byte) string {
	b := []byte{codecV1, status, byte(len(token))}
	b = binary.BigEndian.AppendUint16(b, uint16(len(fingerprint)))
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = append(b, token...)
	b = append(b, fingerprint...)
	return string(append(b, response...))
}

// TestDecodeV1: a value of the earlier layout, version 1, still decodes,
// with Attempt 0 and Fence 0, in progress and completed.
func TestDecodeV1(t *testing.T) {
	tok := store.NewToken()
	r, err := decode("k", encodeV1(statusInProgress, tok, "fp", 1234, nil))
	require.NoError(t, err)
	assert.Equal(t, store.Record{Key: "k", Fingerprint: "fp", Status: store.StatusInProgress, Token: tok,
		LockedUntil: time.UnixMilli(1234), ExpiresAt: time.UnixMilli(1234)}, r)
	r, err = decode("k", encodeV1(statusCompleted, tok, "fp", 1234, []byte("resp")))
	require.NoError(t, err)
	assert.Equal(t, store.Record{Key: "k", Fingerprint: "fp", Status: store.StatusCompleted, Token: tok,
		Response: []byte("resp"), ExpiresAt: time.UnixMilli(1234)}, r)
	_, err = decode("k", encodeV1(statusInProgress, tok, "fp", 1234, nil)[:v1HeaderSize-1])
	assert.ErrorIs(t, err, errCorrupt)
}
