package httpidem

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func TestCodecRoundTrip(t *testing.T) {
	h := http.Header{
		"Content-Type": {"application/json"},
		"X-Multi":      {"a", "", "c"},
		"Set-Cookie":   {"s=1"},
		"Date":         {"now"},
		"Connection":   {"X-Hop"},
		"X-Hop":        {"1"},
		"X-Request-Id": {"r1"},
	}
	h["x-lower"] = []string{"set by map access"}
	h["set-cookie"] = []string{"sneaky=1"}
	p := newHeaderPolicy(nil, []string{"X-Denied"})
	body := []byte("{\"id\":1}\x00\xff binary too")
	enc := encodeResponse(201, h, &p, body)
	got := http.Header{}
	status, gotBody, err := decodeResponse(enc, got)
	if err != nil {
		t.Fatal(err)
	}
	if status != 201 || !bytes.Equal(gotBody, body) {
		t.Fatalf("status %d body %q", status, gotBody)
	}
	want := http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "c"}, "X-Lower": {"set by map access"}}
	if len(got) != len(want) {
		t.Fatalf("header = %v, want %v", got, want)
	}
	for k, vs := range want {
		if strings.Join(got[k], "|") != strings.Join(vs, "|") {
			t.Fatalf("header %s = %q, want %q", k, got[k], vs)
		}
	}
}

func TestCodecAllowlist(t *testing.T) {
	h := http.Header{"Content-Type": {"text/plain"}, "Location": {"/x"}, "Set-Cookie": {"a=1"}, "X-Other": {"1"}}
	p := newHeaderPolicy([]string{"content-type", "Location", "Set-Cookie"}, nil)
	got := http.Header{}
	if _, _, err := decodeResponse(encodeResponse(200, h, &p, nil), got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got.Get("Location") != "/x" || got.Get("Content-Type") != "text/plain" {
		t.Fatalf("header = %v", got)
	}
}

func TestCodecErrors(t *testing.T) {
	all := newHeaderPolicy(nil, nil)
	good := encodeResponse(201, http.Header{"A": {"b"}}, &all, []byte("body"))
	tests := map[string][]byte{
		"empty":            nil,
		"version":          append([]byte{2}, good[1:]...),
		"truncated status": {1, 0x80},
		"status range":     {1, 99, 0},
		"status too big":   {1, 0xe8, 0x07, 0}, // 1000
		"truncated count":  {1, 0xc9, 0x01},    // 201
		"huge count":       {1, 0xc9, 0x01, 100},
		"truncated name":   good[:5],
		"truncated value":  good[:7],
		"empty name":       {1, 0xc9, 0x01, 1, 0, 0},
	}
	for name, b := range tests {
		h := http.Header{}
		if _, _, err := decodeResponse(b, h); err == nil || !strings.HasPrefix(err.Error(), "httpidem: cannot decode stored response") || len(h) != 0 {
			t.Errorf("%s: %v, header %v", name, err, h)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	all := newHeaderPolicy(nil, nil)
	f.Add(encodeResponse(201, http.Header{"A": {"b", "c"}}, &all, []byte("body")))
	f.Add([]byte{1, 0xc8, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := http.Header{"Pre": {"set"}}
		status, body, err := decodeResponse(b, h)
		if err != nil {
			if len(h) != 1 {
				t.Fatalf("a failed decode of %q left header %v", b, h)
			}
			return
		}
		// The same fields as the plain decoder's, one value at a time.
		if want := decodeSimply(t, b, http.Header{"Pre": {"set"}}); !equalHeaders(h, want) {
			t.Fatalf("decode of %q = %q, want %q", b, h, want)
		}
		delete(h, "Pre")
		// Whatever decodes re-encodes and decodes to the same response
		// (headers the policy never replays aside).
		h2 := http.Header{}
		status2, body2, err := decodeResponse(encodeResponse(status, h, &all, body), h2)
		if err != nil || status2 != status || !bytes.Equal(body2, body) || len(h2) > len(h) {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
	})
}

// decodeSimply is the plain decoder decodeResponse must agree with: every
// value its own string, appended to its field.
func decodeSimply(t *testing.T, b []byte, h http.Header) http.Header {
	t.Helper()
	_, fields, _, err := parseHead(b)
	if err != nil {
		t.Fatal(err)
	}
	for len(fields) > 0 {
		name, rest, _ := cutField(fields)
		value, rest, _ := cutField(rest)
		h[string(name)] = append(h[string(name)], string(value))
		fields = rest
	}
	return h
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if strings.Join(vs, "\x00") != strings.Join(b[k], "\x00") || len(vs) != len(b[k]) {
			return false
		}
	}
	return true
}

// TestDecodeSharesNoBacking: the decoded fields share one backing array and
// one string, yet appending to a field, as a handler or an outer middleware
// may, changes no other field, and a field set before the replay keeps its
// values.
func TestDecodeSharesNoBacking(t *testing.T) {
	all := newHeaderPolicy(nil, nil)
	var enc []byte
	{
		// Built by hand, to fix the order: A, A, B, A (a repeat that is not
		// consecutive), Pre (set before the decode), C.
		enc = []byte{codecVersion, 0xc9, 0x01, 6}
		for _, f := range [][2]string{{"A", "1"}, {"A", "application/json"}, {"B", "2"}, {"A", "3"}, {"Pre", "4"}, {"C", "5"}} {
			enc = append(enc, byte(len(f[0])))
			enc = append(enc, f[0]...)
			enc = append(enc, byte(len(f[1])))
			enc = append(enc, f[1]...)
		}
		enc = append(enc, "body"...)
	}
	h := http.Header{"Pre": {"0"}}
	status, body, err := decodeResponse(enc, h)
	if err != nil || status != 201 || string(body) != "body" {
		t.Fatalf("decode = %d, %q, %v", status, body, err)
	}
	want := http.Header{"A": {"1", "application/json", "3"}, "B": {"2"}, "Pre": {"0", "4"}, "C": {"5"}}
	if !equalHeaders(h, want) {
		t.Fatalf("header = %q, want %q", h, want)
	}
	for k := range h {
		h[k] = append(h[k], "added")
	}
	for k, vs := range want {
		if got := h[k][:len(h[k])-1]; strings.Join(got, ",") != strings.Join(vs, ",") {
			t.Fatalf("after appending to every field, %s = %q, want %q and the addition", k, h[k], vs)
		}
	}
	// A round trip through the encoder agrees too.
	h2 := http.Header{}
	if _, _, err := decodeResponse(encodeResponse(201, want, &all, nil), h2); err != nil || !equalHeaders(h2, want) {
		t.Fatalf("round trip = %q, %v", h2, err)
	}
}

// TestDecodeAllocations: a replay's decode makes at most two allocations
// whatever its fields, and none beyond the field slice for common values.
func TestDecodeAllocations(t *testing.T) {
	all := newHeaderPolicy(nil, nil)
	for _, c := range []struct {
		h    http.Header
		want float64
	}{
		{http.Header{"Content-Type": {"application/json"}}, 1},
		{http.Header{"Content-Type": {"application/json"}, "Location": {"/payments/1"}, "X-Multi": {"a", "b"}}, 2},
	} {
		enc := encodeResponse(201, c.h, &all, []byte("{}"))
		h := http.Header{}
		n := testing.AllocsPerRun(100, func() {
			clear(h)
			if _, _, err := decodeResponse(enc, h); err != nil {
				t.Fatal(err)
			}
		})
		if n > c.want {
			t.Errorf("decoding %v makes %v allocations, want at most %v", c.h, n, c.want)
		}
	}
}
