package httpidem

import (
	"net/http"
	"strings"
)

// ReplayedHeader is set to "true" on every replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// neverReplayed lists response headers that are never stored nor replayed,
// whatever the options: cookies (a replay must never hand one client's
// session to a retry), hop-by-hop fields (RFC 9110 §7.6.1), fields that
// describe this one transmission (Date, Content-Length), and the replay
// marker itself.
var neverReplayed = map[string]bool{
	"Set-Cookie":          true,
	"Set-Cookie2":         true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Date":                true,
	"Content-Length":      true,
	ReplayedHeader:        true,
}

// DefaultNotReplayed lists the per-request response headers left out of
// stored responses by default (tracing and request ids, timings); the
// retry's own values are set by whatever produces them. WithoutReplayHeaders
// adds to it; WithReplayHeaders replaces denial with an allowlist.
var DefaultNotReplayed = []string{
	"Traceparent", "Tracestate", "Baggage",
	"X-Request-Id", "X-Correlation-Id", "X-Trace-Id", "Request-Id",
	"X-B3-Traceid", "X-B3-Spanid", "X-B3-Parentspanid", "X-B3-Sampled", "X-B3-Flags", "B3",
	"Uber-Trace-Id", "X-Amzn-Trace-Id", "X-Amzn-Requestid", "X-Cloud-Trace-Context",
	"Server-Timing", "Age",
}

// headerPolicy decides which response headers are kept for replay.
type headerPolicy struct {
	allow map[string]bool // nil: everything not denied
	deny  map[string]bool
}

func newHeaderPolicy(allow, deny []string) headerPolicy {
	p := headerPolicy{deny: map[string]bool{}}
	for _, n := range DefaultNotReplayed {
		p.deny[http.CanonicalHeaderKey(n)] = true
	}
	for _, n := range deny {
		p.deny[http.CanonicalHeaderKey(n)] = true
	}
	if allow != nil {
		p.allow = map[string]bool{}
		for _, n := range allow {
			p.allow[http.CanonicalHeaderKey(n)] = true
		}
	}
	return p
}

// keep reports whether the canonical header name is kept for replay; conn
// holds the response's Connection values, whose fields are hop-by-hop by
// declaration.
func (p *headerPolicy) keep(name string, conn []string) bool {
	if n, ok := cutTrailerPrefix(name); ok {
		// A trailer is judged by its own name: a Set-Cookie sent as a
		// trailer is still a cookie.
		name = http.CanonicalHeaderKey(n)
		if name == "" || strings.HasPrefix(name, http.TrailerPrefix) {
			return false
		}
	}
	if neverReplayed[name] || p.deny[name] {
		return false
	}
	if p.allow != nil && !p.allow[name] {
		return false
	}
	for _, c := range conn {
		for f := range strings.SplitSeq(c, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(f)) == name {
				return false
			}
		}
	}
	return true
}
