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
		h := http.Header{}
		status, body, err := decodeResponse(b, h)
		if err != nil {
			if len(h) != 0 {
				t.Fatalf("a failed decode of %q left header %v", b, h)
			}
			return
		}
		// Whatever decodes re-encodes and decodes to the same response
		// (headers the policy never replays aside).
		h2 := http.Header{}
		status2, body2, err := decodeResponse(encodeResponse(status, h, &all, body), h2)
		if err != nil || status2 != status || !bytes.Equal(body2, body) || len(h2) > len(h) {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
	})
}
