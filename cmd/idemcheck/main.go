// Command idemcheck checks a running HTTP API's idempotency: it sends an
// endpoint the requests of httpidemtest's rules (missing and malformed
// keys, replays, mismatches, duplicates in flight, bursts of identical
// requests, answers lost on the way back, body limits, scopes) and prints a
// verdict per rule.
//
//	idemcheck -url http://127.0.0.1:3000/payments -body '{"amount":1990}' \
//	    -other-body '{"amount":5}' -count-url http://127.0.0.1:3000/payments
//
// It sends traffic only to the host of -url: -count-url must be on the same
// host, and the proxy it starts for the lost-reply rule listens on
// 127.0.0.1 and forwards only there. Every rule takes real effect on the
// service, so point it at a test or staging deployment. The run is bounded
// by -max-requests and -timeout. The exit status is 0 when no rule failed, 1
// when one did, 2 for a usage error.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit/httpidemtest"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// headers is a repeatable "Name: value" flag.
type headers []string

func (h *headers) String() string     { return strings.Join(*h, "; ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

// config is what a run needs; its JSON names are the flags' names, for
// -config files.
type config struct {
	URL            string   `json:"url"`
	Method         string   `json:"method"`
	Body           string   `json:"body"`
	OtherBody      string   `json:"other-body"`
	CountURL       string   `json:"count-url"`
	Header         headers  `json:"header"`
	ScopeHeader    headers  `json:"scope-header"`
	MaxBody        int      `json:"max-body"`
	MaxKeyLen      int      `json:"max-key-len"`
	ReplayHeader   string   `json:"replay-header"`
	BareKeys       bool     `json:"bare-keys"`
	Concurrency    int      `json:"concurrency"`
	MaxRetryAfter  duration `json:"max-retry-after"`
	InFlightAfter  duration `json:"inflight-after"`
	RequestTimeout duration `json:"request-timeout"`
	Timeout        duration `json:"timeout"`
	MaxRequests    int      `json:"max-requests"`
	JSON           bool     `json:"json"`
	Rules          string   `json:"rules"`
	configPath     string   // -config, not read from the file
}

// duration is a time.Duration that reads "2s" from flags and JSON.
type duration time.Duration

func (d *duration) String() string { return time.Duration(*d).String() }
func (d *duration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*d = duration(x)
	return nil
}
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"2s\": %w", err)
	}
	return d.Set(s)
}

func defaults() config {
	return config{Method: http.MethodPost, MaxRetryAfter: duration(2 * time.Second), InFlightAfter: duration(100 * time.Millisecond),
		RequestTimeout: duration(10 * time.Second), Timeout: duration(2 * time.Minute), MaxRequests: 500, Concurrency: 8}
}

const usageHead = `usage: idemcheck -url URL -body JSON -other-body JSON -count-url URL [flags]

idemcheck checks that an HTTP endpoint keeps the Idempotency-Key promises:
keys required and well formed, one effect per key, replays identical and
marked, 422 for a reused key, 409 or a wait for a duplicate in flight, a
burst of identical requests taking effect once, an answer lost on its way
back replayed to the retry, body limits and scopes. It prints a verdict per
rule and exits 1 if any rule failed.

Traffic: idemcheck sends requests ONLY to the host of -url (-count-url must
be on the same host). The proxy it starts for the lost-reply check listens
on 127.0.0.1 and forwards only to that host. Every check takes real effect
(it creates what the endpoint creates): use a test or staging service. The
run is bounded by -max-requests and -timeout.

flags:
`

func newFlags(cfg *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("idemcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.configPath, "config", "", "a JSON file with any of these flags as members (\"url\", \"body\", \"scope-header\": [...]); flags given override it")
	fs.StringVar(&cfg.URL, "url", cfg.URL, "the endpoint's URL, as http://127.0.0.1:3000/payments (required)")
	fs.StringVar(&cfg.Method, "method", cfg.Method, "the endpoint's method")
	fs.StringVar(&cfg.Body, "body", cfg.Body, "a valid request body: it takes effect once per key (required)")
	fs.StringVar(&cfg.OtherBody, "other-body", cfg.OtherBody, "a different valid body, for the mismatch checks (required)")
	fs.StringVar(&cfg.CountURL, "count-url", cfg.CountURL, "a URL on the same host whose GET answers a JSON array with one element per effect (required)")
	fs.Var(&cfg.Header, "header", "a header for every request, \"Name: value\" (repeatable)")
	fs.Var(&cfg.ScopeHeader, "scope-header", "a header that puts a request in a scope, \"Authorization: Bearer alice\"; give two for the scope check (repeatable)")
	fs.IntVar(&cfg.MaxBody, "max-body", cfg.MaxBody, "the endpoint's request-body limit in bytes, for the body-limit checks (0 skips them)")
	fs.IntVar(&cfg.MaxKeyLen, "max-key-len", cfg.MaxKeyLen, "the longest key the endpoint accepts (0: 255)")
	fs.StringVar(&cfg.ReplayHeader, "replay-header", cfg.ReplayHeader, "the header that marks a replay with \"true\" (default Idempotent-Replayed)")
	fs.BoolVar(&cfg.BareKeys, "bare-keys", cfg.BareKeys, "send keys bare instead of as the draft's quoted strings")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "identical requests sent at once in the burst check (at most 64)")
	fs.Var(&cfg.MaxRetryAfter, "max-retry-after", "the longest Retry-After a 409 for a duplicate in flight may ask for")
	fs.Var(&cfg.InFlightAfter, "inflight-after", "how long after a request its duplicate is sent; the endpoint must take longer to answer for the in-flight checks")
	fs.Var(&cfg.RequestTimeout, "request-timeout", "bound on each request")
	fs.Var(&cfg.Timeout, "timeout", "bound on the whole run")
	fs.IntVar(&cfg.MaxRequests, "max-requests", cfg.MaxRequests, "bound on the requests of the whole run")
	fs.BoolVar(&cfg.JSON, "json", cfg.JSON, "print the report as JSON")
	fs.StringVar(&cfg.Rules, "rules", cfg.Rules, "run only these rules or groups, comma-separated (\"keys,replay/marker\"); all when empty")
	return fs
}

// parse reads the flags, and the -config file under them.
func parse(args []string, stderr io.Writer) (config, error) {
	cfg := defaults()
	fs := newFlags(&cfg, stderr)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.configPath != "" {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		path := cfg.configPath
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("-config: %w", err)
		}
		cfg = defaults()
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("-config %s: %w", path, err)
		}
		// The flags given on the command line override the file.
		if given["header"] {
			cfg.Header = nil
		}
		if given["scope-header"] {
			cfg.ScopeHeader = nil
		}
		if err := newFlags(&cfg, io.Discard).Parse(args); err != nil {
			return cfg, err
		}
	}
	switch {
	case cfg.URL == "":
		return cfg, errors.New("-url is required")
	case cfg.Body == "" || cfg.OtherBody == "":
		return cfg, errors.New("-body and -other-body are required")
	case cfg.CountURL == "":
		return cfg, errors.New("-count-url is required: idemcheck counts effects with it")
	case cfg.MaxRequests <= 0:
		return cfg, errors.New("-max-requests must be positive")
	case cfg.Timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	return cfg, nil
}

func splitHeader(v string) (string, string, error) {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", "", fmt.Errorf("header %q is not \"Name: value\"", v)
	}
	return name, strings.TrimSpace(value), nil
}

// target turns the config into an httpidemtest target.
func (cfg config) target() (httpidemtest.Target, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return httpidemtest.Target{}, fmt.Errorf("-url %q is not an http:// or https:// URL", cfg.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return httpidemtest.Target{}, fmt.Errorf("-url %q: a query or fragment is not supported", cfg.URL)
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	body, other := []byte(cfg.Body), []byte(cfg.OtherBody)
	tg := httpidemtest.Target{
		URL:            u.Scheme + "://" + u.Host,
		Method:         cfg.Method,
		Path:           path,
		Header:         http.Header{},
		Body:           func() []byte { return body },
		OtherBody:      func() []byte { return other },
		CountPath:      cfg.CountURL,
		MaxBody:        cfg.MaxBody,
		MaxKeyLen:      cfg.MaxKeyLen,
		ReplayHeader:   cfg.ReplayHeader,
		BareKeys:       cfg.BareKeys,
		Concurrency:    cfg.Concurrency,
		MaxRetryAfter:  time.Duration(cfg.MaxRetryAfter),
		InFlightAfter:  time.Duration(cfg.InFlightAfter),
		RequestTimeout: time.Duration(cfg.RequestTimeout),
		MaxRequests:    cfg.MaxRequests,
	}
	for _, h := range cfg.Header {
		k, v, err := splitHeader(h)
		if err != nil {
			return tg, fmt.Errorf("-header: %w", err)
		}
		tg.Header.Add(k, v)
	}
	for _, h := range cfg.ScopeHeader {
		k, v, err := splitHeader(h)
		if err != nil {
			return tg, fmt.Errorf("-scope-header: %w", err)
		}
		tg.Scopes = append(tg.Scopes, http.Header{http.CanonicalHeaderKey(k): {v}})
	}
	return tg, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "idemcheck:", err)
		return 2
	}
	tg, err := cfg.target()
	if err != nil {
		fmt.Fprintln(stderr, "idemcheck:", err)
		return 2
	}
	only, err := selectRules(cfg.Rules)
	if err != nil {
		fmt.Fprintln(stderr, "idemcheck:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.Timeout))
	defer cancel()
	start := time.Now()
	results, err := httpidemtest.Check(ctx, tg, only...)
	if err != nil {
		fmt.Fprintln(stderr, "idemcheck:", err)
		return 2
	}
	rep := newReport(cfg, results, time.Since(start))
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "idemcheck:", err)
			return 2
		}
	} else {
		rep.table(stdout)
	}
	if rep.Fail > 0 {
		return 1
	}
	return 0
}

// selectRules returns the rules named in a comma-separated list of rules and
// groups.
func selectRules(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, want := range strings.Split(list, ",") {
		want = strings.TrimSpace(want)
		found := false
		for _, r := range httpidemtest.Rules() {
			if r.Name == want || strings.HasPrefix(r.Name, want+"/") {
				out, found = append(out, r.Name), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-rules: no rule or group %q", want)
		}
	}
	return out, nil
}

// report is the run's outcome, as printed.
type report struct {
	Method   string       `json:"method"`
	URL      string       `json:"url"`
	Pass     int          `json:"pass"`
	Fail     int          `json:"fail"`
	Skip     int          `json:"skip"`
	Requests int          `json:"requests"`
	Elapsed  string       `json:"elapsed"`
	Results  []jsonResult `json:"results"`
	results  []httpidemtest.Result
}

type jsonResult struct {
	Rule      string         `json:"rule"`
	Verdict   string         `json:"verdict"`
	Doc       string         `json:"doc"`
	Detail    string         `json:"detail,omitempty"`
	Requests  int            `json:"requests"`
	Elapsed   string         `json:"elapsed"`
	Exchanges []jsonExchange `json:"exchanges,omitempty"`
}

type jsonExchange struct {
	Note        string              `json:"note"`
	Request     string              `json:"request"`
	Key         []string            `json:"idempotency_key,omitempty"`
	Scope       []string            `json:"scope,omitempty"`
	RequestBody string              `json:"request_body,omitempty"`
	Status      int                 `json:"status,omitempty"`
	Header      map[string][]string `json:"header,omitempty"`
	Body        string              `json:"body,omitempty"`
	Error       string              `json:"error,omitempty"`
	Elapsed     string              `json:"elapsed"`
}

func clip(b []byte) string {
	const n = 2048
	if len(b) > n {
		return string(b[:n]) + fmt.Sprintf("…(%d bytes)", len(b))
	}
	return string(b)
}

func newReport(cfg config, results []httpidemtest.Result, elapsed time.Duration) report {
	docs := map[string]string{}
	for _, r := range httpidemtest.Rules() {
		docs[r.Name] = r.Doc
	}
	rep := report{Method: cfg.Method, URL: cfg.URL, Elapsed: elapsed.Round(time.Millisecond).String(), results: results}
	for _, r := range results {
		switch r.Verdict {
		case httpidemtest.Pass:
			rep.Pass++
		case httpidemtest.Fail:
			rep.Fail++
		case httpidemtest.Skip:
			rep.Skip++
		}
		rep.Requests += r.Requests
		jr := jsonResult{Rule: r.Rule, Verdict: string(r.Verdict), Doc: docs[r.Rule], Detail: strings.TrimSpace(r.Detail),
			Requests: r.Requests, Elapsed: r.Elapsed.Round(time.Millisecond).String()}
		if r.Verdict == httpidemtest.Fail {
			for _, e := range r.Exchanges {
				jr.Exchanges = append(jr.Exchanges, jsonExchange{Note: e.Note, Request: e.Method + " " + e.URL, Key: e.Key, Scope: e.Scope,
					RequestBody: clip(e.RequestBody), Status: e.Status, Header: e.Header, Body: clip(e.Body), Error: e.Err,
					Elapsed: e.Elapsed.Round(time.Millisecond).String()})
			}
		}
		rep.Results = append(rep.Results, jr)
	}
	return rep
}

// table prints the report as a table, then each failure with its exchanges.
func (rep report) table(w io.Writer) {
	fmt.Fprintf(w, "idemcheck: %s %s\n\n", rep.Method, rep.URL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tVERDICT\tREQUESTS\tTIME\tNOTE")
	for _, r := range rep.results {
		note, _, _ := strings.Cut(strings.TrimSpace(r.Detail), "\n")
		if len(note) > 100 {
			note = note[:100] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", r.Rule, strings.ToUpper(string(r.Verdict)), r.Requests, r.Elapsed.Round(time.Millisecond), note)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d rules: %d passed, %d failed, %d skipped; %d requests in %s\n", len(rep.results), rep.Pass, rep.Fail, rep.Skip, rep.Requests, rep.Elapsed)
	for _, r := range rep.results {
		if r.Verdict == httpidemtest.Fail {
			fmt.Fprintf(w, "\n%s\n", r)
		}
	}
}
