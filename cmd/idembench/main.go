// Command idembench measures every idemkit backend against its raw engine
// doing the same work, and prints how fast the store is relative to raw.
//
// For each backend it runs that package's interleaved benchmark
// (BenchmarkPaired, or BenchmarkInterleaved for SQLite) with
// go test -count N: every round runs the store's operations and the raw
// engine's alternately in the same loop, so both meet the same load from
// the rest of the machine, and reports the ratio store ÷ raw (throughput;
// above 1 means the store is faster). idembench prints, per backend and
// case, the median of the per-round ratios with their range:
//
//	go run ./cmd/idembench -count 5
//	go run ./cmd/idembench -backends redis,postgres -count 9 -v
//
// Backends whose server is not configured (IDEMKIT_POSTGRES_URL,
// IDEMKIT_REDIS_ADDR, IDEMKIT_MYSQL_DSN, IDEMKIT_DYNAMODB_ENDPOINT,
// IDEMKIT_NATS_URL, SPANNER_EMULATOR_HOST) skip their benchmarks and are
// reported as skipped. Run it from the module root.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// backend is one package whose interleaved benchmark idembench runs.
type backend struct {
	name      string
	pkg       string
	bench     string // -bench pattern
	benchtime string // default -benchtime: enough for a steady round, short enough for -count 9
}

var backends = []backend{
	{"memory", "./store/memory/", "^BenchmarkPaired$", "200000x"},
	{"sqlite", "./store/sqlite/", "^BenchmarkInterleaved$", "2000x"},
	{"postgres", "./store/postgres/", "^BenchmarkPaired$", "4000x"},
	{"redis", "./store/redis/", "^BenchmarkPaired$", "4000x"},
	{"mysql", "./store/mysql/", "^BenchmarkPaired$", "2000x"},
	// Nested modules, reached through go.work.
	{"dynamodb", "./store/dynamodb/", "^BenchmarkPaired$", "1000x"},
	{"nats", "./store/nats/", "^BenchmarkPaired$", "2000x"},
	{"spanner", "./store/spanner/", "^BenchmarkPaired$", "256x"},
	// Decorators: "raw" is the same store without the decorator.
	{"cache", "./store/cache/", "^BenchmarkPaired$", "20000x"},
	{"seal", "./store/seal/", "^BenchmarkPaired$", "8000x"},
	// The HTTP middleware against a minimal hand-written one on the same
	// memory store. 300000 requests: at 16 workers a round is 8000
	// requests a side, and fewer than 40 rounds left the replay's ratio
	// anywhere from 0.87 to 1.14 between runs.
	{"http", "./httpidem/", "^BenchmarkPaired$", "300000x"},
}

func main() {
	var (
		only      = flag.String("backends", "memory,sqlite,postgres,redis,mysql", "comma-separated backends to run (memory, sqlite, postgres, redis, mysql, dynamodb, nats, spanner, cache, seal, http)")
		count     = flag.Int("count", 5, "rounds per benchmark (go test -count); the median of the per-round ratios is printed")
		benchtime = flag.String("benchtime", "", "go test -benchtime for every backend (default: each backend's own)")
		filter    = flag.String("run", "", "extra sub-benchmark pattern, appended to the backend's -bench pattern with /")
		verbose   = flag.Bool("v", false, "print go test's output as it comes")
	)
	flag.Parse()
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "idembench: -count must be at least 1")
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	for n := range want {
		if !known(n) {
			fmt.Fprintf(os.Stderr, "idembench: unknown backend %q\n", n)
			os.Exit(2)
		}
	}
	failed := false
	var all []result
	for _, be := range backends {
		if !want[be.name] {
			continue
		}
		bt := be.benchtime
		if *benchtime != "" {
			bt = *benchtime
		}
		pattern := be.bench
		if *filter != "" {
			pattern += "/" + *filter
		}
		args := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", bt, "-count", strconv.Itoa(*count), be.pkg}
		fmt.Fprintf(os.Stderr, "idembench: go %s\n", strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		var out bytes.Buffer
		var w io.Writer = &out
		if *verbose {
			w = io.MultiWriter(&out, os.Stderr)
		}
		cmd.Stdout, cmd.Stderr = w, w
		err := cmd.Run()
		rs := parse(be.name, &out)
		if err != nil {
			failed = true
			if !*verbose {
				os.Stderr.Write(out.Bytes())
			}
			fmt.Fprintf(os.Stderr, "idembench: %s: go test failed: %v\n", be.name, err)
		}
		if len(rs) == 0 && err == nil {
			fmt.Fprintf(os.Stderr, "idembench: %s: no ratios reported (server not configured?)\n", be.name)
		}
		all = append(all, rs...)
	}
	printTable(os.Stdout, all)
	if failed {
		os.Exit(1)
	}
}

func known(name string) bool {
	for _, be := range backends {
		if be.name == name {
			return true
		}
	}
	return false
}

// result is one ratio metric of one benchmark case, one value per round.
type result struct {
	backend, bench, metric string
	values                 []float64
}

// parse collects, from go test -bench output, every metric whose unit is a
// ratio to raw (store/raw, sqlite/raw-g8, …) or a side's allocations per
// operation (store-allocs/op, raw-allocs/op), in the order first seen.
func parse(name string, r io.Reader) []result {
	var out []result
	index := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pending := "" // a benchmark name whose figures a log line pushed to a later line
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && strings.HasPrefix(f[0], "Benchmark") {
			pending = f[0]
		}
		switch {
		case len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark"):
		case len(f) >= 3 && pending != "" && isCount(f[0]):
			// "BenchmarkX-2 <log output>" then "N value unit ...".
			f = append([]string{pending}, f...)
		default:
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a name followed by log output, not figures
		}
		pending = ""
		bench := trimProcs(f[0])
		// f[1] is the iteration count, then value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			unit := f[i+1]
			if !strings.Contains(unit, "/raw") && !strings.HasSuffix(unit, "-allocs/op") {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			k := bench + " " + unit
			j, ok := index[k]
			if !ok {
				j = len(out)
				index[k] = j
				out = append(out, result{backend: name, bench: bench, metric: unit})
			}
			out[j].values = append(out[j].values, v)
		}
	}
	return out
}

func isCount(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// trimProcs drops the -GOMAXPROCS suffix go test adds to benchmark names
// and the package's top-level benchmark name.
func trimProcs(s string) string {
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		if _, err := strconv.Atoi(s[i+1:]); err == nil {
			s = s[:i]
		}
	}
	if i := strings.IndexByte(s, '/'); i > 0 {
		s = s[i+1:]
	}
	return s
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func printTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tcase\tratio\tmedian\tmin\tmax\trounds")
	for _, r := range rs {
		lo, hi := r.values[0], r.values[0]
		for _, v := range r.values {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%d\n", r.backend, r.bench, r.metric, median(r.values), lo, hi, len(r.values))
	}
	tw.Flush()
}
