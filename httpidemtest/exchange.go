package httpidemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Exchange is one request the suite sent and what came back, kept so that a
// failure can show it.
type Exchange struct {
	// Note says what the request was for ("first", "retry", ...).
	Note string `json:"note"`
	// Method and URL of the request.
	Method string `json:"method"`
	URL    string `json:"url"`
	// Key is the Idempotency-Key field values sent (none for a request
	// without the header).
	Key []string `json:"key,omitempty"`
	// Scope is the scope headers sent, as "Name: value" lines.
	Scope []string `json:"scope,omitempty"`
	// RequestBody is the body sent.
	RequestBody []byte `json:"request_body,omitempty"`
	// Status is the answer's status, 0 when none came (see Err).
	Status int `json:"status"`
	// Header is the answer's header.
	Header http.Header `json:"header,omitempty"`
	// Body is the answer's body.
	Body []byte `json:"body,omitempty"`
	// Err says why no complete answer came.
	Err string `json:"error,omitempty"`
	// Elapsed is how long the exchange took.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// keyHeaders are the answer's headers an exchange shows.
var keyHeaders = []string{"Content-Type", "Retry-After", "Location", "Content-Length"}

// String shows the exchange in a few lines: the request, the status, the
// headers that matter here and the body, truncated.
func (e Exchange) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s", e.Note, e.Method, e.URL)
	if e.Key == nil {
		b.WriteString(" (no Idempotency-Key)")
	}
	for _, k := range e.Key {
		if len(k) > 48 {
			k = k[:48] + "…(" + strconv.Itoa(len(k)) + " bytes)"
		}
		fmt.Fprintf(&b, " Idempotency-Key: %s", k)
	}
	for _, s := range e.Scope {
		fmt.Fprintf(&b, " [%s]", s)
	}
	fmt.Fprintf(&b, " body(%d) %s", len(e.RequestBody), truncate(e.RequestBody, 60))
	if e.Err != "" {
		fmt.Fprintf(&b, "\n      -> no answer: %s (%v)", e.Err, e.Elapsed.Round(time.Millisecond))
		return b.String()
	}
	fmt.Fprintf(&b, "\n      -> %d", e.Status)
	var names []string
	for k := range e.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if isKeyHeader(k) {
			fmt.Fprintf(&b, " %s: %s", k, strings.Join(e.Header[k], ", "))
		}
	}
	fmt.Fprintf(&b, " (%v) body(%d) %s", e.Elapsed.Round(time.Millisecond), len(e.Body), truncate(e.Body, 160))
	return b.String()
}

func isKeyHeader(k string) bool {
	for _, h := range keyHeaders {
		if strings.EqualFold(h, k) {
			return true
		}
	}
	return strings.Contains(strings.ToLower(k), "idempot") || strings.Contains(strings.ToLower(k), "replay")
}

// truncate quotes b, cut to n bytes.
func truncate(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:n])) + "…(" + strconv.Itoa(len(b)) + " bytes)"
}

// req is one request a rule sends.
type req struct {
	note  string
	keys  []string    // raw Idempotency-Key field values; nil: no header
	body  []byte      // the body
	scope http.Header // headers of the request's scope
}

// newKey returns a fresh random key.
func newKey() string {
	return "idemtest-" + rand.Text()
}

// keyed returns the field value that carries key, quoted as the draft says
// unless the target wants bare keys.
func (t *target) keyed(key string) []string {
	if t.BareKeys {
		return []string{key}
	}
	return []string{strconv.Quote(key)}
}

// do sends one request and reads the whole answer.
func (t *target) do(ctx context.Context, client *http.Client, base string, r req) Exchange {
	e := Exchange{Note: r.note, Method: t.Method, URL: base + t.path, Key: r.keys, RequestBody: r.body}
	start := time.Now()
	defer func() { e.Elapsed = time.Since(start) }()
	hr, err := http.NewRequestWithContext(ctx, t.Method, e.URL, bytes.NewReader(r.body))
	if err != nil {
		e.Err = err.Error()
		return e
	}
	for k, vs := range t.Header {
		hr.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range r.scope {
		hr.Header[http.CanonicalHeaderKey(k)] = vs
		for _, v := range vs {
			e.Scope = append(e.Scope, k+": "+v)
		}
	}
	if r.keys != nil {
		hr.Header["Idempotency-Key"] = r.keys
	}
	resp, err := client.Do(hr)
	if err != nil {
		e.Err = err.Error()
		return e
	}
	defer resp.Body.Close()
	e.Status, e.Header = resp.StatusCode, resp.Header
	e.Body, err = io.ReadAll(resp.Body)
	if err != nil {
		e.Err = "reading the body: " + err.Error()
	}
	return e
}
