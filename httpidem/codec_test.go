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
	keep := newHeaderPolicy(nil, []string{"X-Denied"}).keepFunc(h)
	body := []byte("{\"id\":1}\x00\xff binary too")
	enc := encodeResponse(201, h, keep, body)
	got, err := decodeResponse(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.status != 201 || !bytes.Equal(got.body, body) {
		t.Fatalf("status %d body %q", got.status, got.body)
	}
	want := http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "c"}, "X-Lower": {"set by map access"}}
	if len(got.header) != len(want) {
		t.Fatalf("header = %v, want %v", got.header, want)
	}
	for k, vs := range want {
		if strings.Join(got.header[k], "|") != strings.Join(vs, "|") {
			t.Fatalf("header %s = %q, want %q", k, got.header[k], vs)
		}
	}
}

func TestCodecAllowlist(t *testing.T) {
	h := http.Header{"Content-Type": {"text/plain"}, "Location": {"/x"}, "Set-Cookie": {"a=1"}, "X-Other": {"1"}}
	keep := newHeaderPolicy([]string{"content-type", "Location", "Set-Cookie"}, nil).keepFunc(h)
	got, err := decodeResponse(encodeResponse(200, h, keep, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.header) != 2 || got.header.Get("Location") != "/x" || got.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("header = %v", got.header)
	}
}

func TestCodecErrors(t *testing.T) {
	good := encodeResponse(201, http.Header{"A": {"b"}}, func(string) bool { return true }, []byte("body"))
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
		if _, err := decodeResponse(b); err == nil || !strings.HasPrefix(err.Error(), "httpidem: cannot decode stored response") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(encodeResponse(201, http.Header{"A": {"b", "c"}}, func(string) bool { return true }, []byte("body")))
	f.Add([]byte{1, 200, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeResponse(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes when its header
		// has one name per value run (map order aside): check the parts.
		again, err := decodeResponse(encodeResponse(r.status, r.header, func(string) bool { return true }, r.body))
		if err != nil || again.status != r.status || !bytes.Equal(again.body, r.body) || len(again.header) > len(r.header) {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
	})
}
