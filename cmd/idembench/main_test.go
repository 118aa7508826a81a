package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/idemkit/idemkit/store/redis
BenchmarkPaired/ClaimComplete/workers=1-2         	    4000	     72638 ns/op	     27962 raw-ops/s	     27228 store-ops/s	         0.9738 store/raw
BenchmarkPaired/ClaimComplete/workers=1-2         	    4000	     72121 ns/op	     28346 raw-ops/s	     27252 store-ops/s	         0.9614 store/raw
BenchmarkPaired/ClaimComplete/workers=1-2         	    4000	     78423 ns/op	     26117 raw-ops/s	     25009 store-ops/s	         1.2 store/raw
BenchmarkInterleaved/new-2      	2026/12/01 22:42:58 WARN redis: a log line in the middle
    2000	     75561 ns/op	        1.402 raw-g8/g1	         0.9546 sqlite/raw-g1	         1.108 sqlite/raw-g8
2026/12/01 22:42:58 WARN 12 a log line of its own
BenchmarkInterleaved/new-2      	    2000	     75561 ns/op	        1.402 raw-g8/g1	         0.8546 sqlite/raw-g1	         1.308 sqlite/raw-g8
BenchmarkPaired/First/workers=1-2         	   20000	     16640 ns/op	        18.79 raw-allocs/op	      4023 raw-ns/op	        41.69 store-allocs/op	     12602 store-ns/op	         0.3192 store/raw	    5239 B/op	      61 allocs/op
--- SKIP: BenchmarkSomething
PASS
ok  	github.com/idemkit/idemkit/store/redis	12.3s
`

func TestParse(t *testing.T) {
	rs := parse("x", strings.NewReader(sample))
	if len(rs) != 6 {
		t.Fatalf("parsed %d results, want 6 (store/raw, sqlite/raw-g1, sqlite/raw-g8, raw-allocs/op, store-allocs/op, store/raw): %+v", len(rs), rs)
	}
	want := []struct {
		bench, metric string
		n             int
		median        float64
	}{
		{"ClaimComplete/workers=1", "store/raw", 3, 0.9738},
		{"new", "sqlite/raw-g1", 2, (0.9546 + 0.8546) / 2},
		{"new", "sqlite/raw-g8", 2, (1.108 + 1.308) / 2},
		{"First/workers=1", "raw-allocs/op", 1, 18.79},
		{"First/workers=1", "store-allocs/op", 1, 41.69},
		{"First/workers=1", "store/raw", 1, 0.3192},
	}
	for i, w := range want {
		r := rs[i]
		if r.bench != w.bench || r.metric != w.metric || len(r.values) != w.n {
			t.Errorf("result %d = %s %s with %d values, want %s %s with %d", i, r.bench, r.metric, len(r.values), w.bench, w.metric, w.n)
			continue
		}
		if m := median(r.values); m < w.median-1e-9 || m > w.median+1e-9 {
			t.Errorf("%s %s: median %v, want %v", r.bench, r.metric, m, w.median)
		}
	}
}

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, parse("redis", strings.NewReader(sample)))
	out := b.String()
	for _, s := range []string{"backend", "redis", "ClaimComplete/workers=1", "0.97", "0.96", "1.20", "3"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkPaired/Replay/workers=16-2": "Replay/workers=16",
		"BenchmarkInterleaved/new-8":          "new",
		"BenchmarkPaired/a-b":                 "a-b",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}
