package httpidemtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rules are every check, in the order they run.
var rules = []rule{
	{RuleInfo{Name: "keys/missing", Doc: "a request without an Idempotency-Key is refused with 400 and takes no effect"}, always, keyMissing},
	{RuleInfo{Name: "keys/malformed", Doc: "a malformed key (empty, unterminated quote, a list, two fields) is refused with 400 and takes no effect"}, always, keyMalformed},
	{RuleInfo{Name: "keys/too-long", Doc: "a key one character over the limit is refused with 400; a key at the limit works"}, always, keyTooLong},
	{RuleInfo{Name: "replay/identical", Doc: "a retry gets the first answer's status, headers and body, and the effect runs once"}, always, replayIdentical},
	{RuleInfo{Name: "replay/marker", Doc: "a replay carries the replay marker (Idempotent-Replayed: true); the first answer does not"}, always, replayMarker},
	{RuleInfo{Name: "mismatch/422", Doc: "the key reused with a different body gets 422 and takes no effect"}, always, mismatch422},
	{RuleInfo{Name: "mismatch/not-poisoned", Doc: "after a 422 the key still replays its first answer to the first request"}, always, mismatchNotPoisoned},
	{RuleInfo{Name: "errors/problem-json", Doc: "the middleware's own errors (400, 422, 409) are application/problem+json objects whose status member, if any, is the status"}, always, problemJSON},
	{RuleInfo{Name: "inflight/conflict-or-wait", Doc: "a duplicate while the first runs gets 409, or waits and replays the first answer; the effect runs once", Needs: "Hold, or an endpoint slower than InFlightAfter"}, always, inflightConflictOrWait},
	{RuleInfo{Name: "inflight/retry-after", Doc: "a 409 for a duplicate in flight says Retry-After, at most MaxRetryAfter (2 s)", Needs: "Hold, or an endpoint slower than InFlightAfter"}, always, inflightRetryAfter},
	{RuleInfo{Name: "notkept/5xx", Doc: "a 500 is not kept: the retry runs the effect for real", Needs: "Fail"}, needFail, func(c *checker) { notKept(c, http.StatusInternalServerError) }},
	{RuleInfo{Name: "notkept/429", Doc: "a 429 is not kept: the retry runs the effect for real", Needs: "Fail"}, needFail, func(c *checker) { notKept(c, http.StatusTooManyRequests) }},
	{RuleInfo{Name: "concurrency/burst", Doc: "identical requests sent at once take effect once, and every answer but 409s is the same"}, always, burst},
	{RuleInfo{Name: "faults/lost-reply", Doc: "when the answer is lost on its way back (a proxy drops it), the retry replays it and the effect runs once"}, always, lostReply},
	{RuleInfo{Name: "faults/restart", Doc: "a retry after the server restarted replays the first answer; the effect runs once", Needs: "Restart"}, needRestart, restart},
	{RuleInfo{Name: "limits/body-at-limit", Doc: "a body of exactly MaxBody bytes is served, kept and replayed", Needs: "MaxBody"}, needMaxBody, bodyAtLimit},
	{RuleInfo{Name: "limits/body-over-limit", Doc: "a body one byte over MaxBody gets 413 and takes no effect", Needs: "MaxBody"}, needMaxBody, bodyOverLimit},
	{RuleInfo{Name: "scope/separate", Doc: "the same key from two scopes takes effect twice, and each scope replays its own answer", Needs: "Scopes (two)"}, needScopes, scopeSeparate},
}

func needFail(t *target) string {
	if t.Fail == nil {
		return "needs Target.Fail (in-process targets): a way to make the endpoint answer 500 or 429 without its effect"
	}
	return ""
}

func needRestart(t *target) string {
	if t.Restart == nil {
		return "needs Target.Restart (in-process targets): a way to restart the server"
	}
	return ""
}

func needMaxBody(t *target) string {
	if t.MaxBody == 0 {
		return "needs Target.MaxBody: the endpoint's request-body limit"
	}
	return ""
}

func needScopes(t *target) string {
	if len(t.Scopes) < 2 {
		return "needs Target.Scopes: headers for two scopes (two callers)"
	}
	return ""
}

// effects fails the rule unless exactly want effects happened since before.
func (c *checker) effects(before, want int, what string) bool {
	n, ok := c.count()
	if !ok {
		return false
	}
	if n-before != want {
		c.failf("%s: the effect ran %d times, want %d", what, n-before, want)
		return false
	}
	return true
}

// answered fails the rule for an exchange that got no answer.
func (c *checker) answered(e Exchange) bool {
	if e.Err != "" {
		c.failf("%s: no answer: %s", e.Note, e.Err)
		return false
	}
	return true
}

// first sends body with key and fails the rule unless the endpoint served it
// (a status below 400): rules start from a request that works.
func (c *checker) first(key string, body []byte, scope http.Header) (Exchange, bool) {
	e := c.send(req{note: "first", keys: c.t.keyed(key), body: body, scope: scope})
	if !c.answered(e) {
		return e, false
	}
	if e.Status >= 400 {
		c.failf("first: a fresh key with a valid body answered %d; the suite needs an endpoint that serves Body", e.Status)
		return e, false
	}
	return e, true
}

func (c *checker) replayed(e Exchange) bool {
	return strings.EqualFold(strings.TrimSpace(e.Header.Get(c.t.ReplayHeader)), "true")
}

// alwaysVolatile are response headers a replay may change.
var alwaysVolatile = []string{
	"Date", "Set-Cookie", "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Trailer",
	"Proxy-Connection", "Upgrade", "Age", "Server-Timing", "Traceparent", "Tracestate",
	"X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Amzn-Trace-Id",
}

// sameAnswer returns what differs between a first answer and its replay:
// status, body, and with headers every header of the first but the volatile
// ones and the replay marker (replay/identical judges headers; the other
// rules judge that the retry got the first answer's status and body).
func (c *checker) sameAnswer(first, retry Exchange, headers bool) []string {
	var diff []string
	if first.Status != retry.Status {
		diff = append(diff, "status "+strconv.Itoa(retry.Status)+", the first was "+strconv.Itoa(first.Status))
	}
	if !bytes.Equal(first.Body, retry.Body) {
		diff = append(diff, "a different body")
	}
	for k, vs := range first.Header {
		if !headers || c.volatile(k) {
			continue
		}
		if got := retry.Header.Values(k); !slices.Equal(got, vs) {
			diff = append(diff, "header "+k+": "+strconv.Quote(strings.Join(got, ", "))+", the first had "+strconv.Quote(strings.Join(vs, ", ")))
		}
	}
	slices.Sort(diff)
	return diff
}

func (c *checker) volatile(k string) bool {
	eq := func(v string) bool { return strings.EqualFold(v, k) }
	return strings.EqualFold(k, c.t.ReplayHeader) || slices.ContainsFunc(alwaysVolatile, eq) || slices.ContainsFunc(c.t.Volatile, eq)
}

// mustReplay fails the rule unless retry has the status and body of first.
func (c *checker) mustReplay(first, retry Exchange) bool {
	return c.mustReplayHeaders(first, retry, false)
}

// mustReplayHeaders fails the rule unless retry is the replay of first,
// headers included when asked.
func (c *checker) mustReplayHeaders(first, retry Exchange, headers bool) bool {
	if !c.answered(retry) {
		return false
	}
	if d := c.sameAnswer(first, retry, headers); len(d) > 0 {
		c.failf("%s is not the first answer: %s", retry.Note, strings.Join(d, "; "))
		return false
	}
	return true
}

func keyMissing(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	e := c.send(req{note: "no key", body: c.t.Body()})
	if c.answered(e) && e.Status != http.StatusBadRequest {
		c.failf("a request without an Idempotency-Key answered %d, want 400", e.Status)
	}
	c.effects(before, 0, "without a key")
}

// malformedKeys are field values every reading of the draft rejects: the
// draft's key is one Structured Field string.
var malformedKeys = []struct {
	what string
	vals []string
}{
	{"an empty field", []string{""}},
	{"an empty string", []string{`""`}},
	{"an unterminated quote", []string{`"abc`}},
	{"a list of two keys", []string{`"idemtest-a", "idemtest-b"`}},
	{"two Idempotency-Key fields", []string{`"idemtest-a"`, `"idemtest-b"`}},
}

func keyMalformed(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	for _, m := range malformedKeys {
		vals := slices.Clone(m.vals)
		for i, v := range vals { // fresh keys, so that a lenient endpoint cannot replay
			vals[i] = strings.ReplaceAll(v, "idemtest-", newKey()+"-")
		}
		e := c.send(req{note: m.what, keys: vals, body: c.t.Body()})
		if c.answered(e) && e.Status != http.StatusBadRequest {
			c.failf("a key that is %s answered %d, want 400", m.what, e.Status)
		}
	}
	c.effects(before, 0, "with malformed keys")
}

func keyTooLong(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	long := newKey()
	if n := c.t.MaxKeyLen + 1; len(long) > n {
		long = long[len(long)-n:] // the random end: still a fresh key
	} else {
		long += strings.Repeat("x", n-len(long))
	}
	e := c.send(req{note: "key over the limit", keys: c.t.keyed(long), body: c.t.Body()})
	if c.answered(e) && e.Status != http.StatusBadRequest {
		c.failf("a key of %d characters (the limit is %d) answered %d, want 400", len(long), c.t.MaxKeyLen, e.Status)
	}
	if !c.effects(before, 0, "with a key over the limit") {
		return
	}
	atLimit := long[:c.t.MaxKeyLen]
	e = c.send(req{note: "key at the limit", keys: c.t.keyed(atLimit), body: c.t.Body()})
	if c.answered(e) && e.Status >= 400 {
		c.failf("a key of %d characters, the limit, answered %d; it must be served", len(atLimit), e.Status)
	}
	c.effects(before, 1, "with a key at the limit")
}

func replayIdentical(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	key, body := newKey(), c.t.Body()
	first, ok := c.first(key, body, nil)
	if !ok {
		return
	}
	retry := c.retry(req{note: "retry", keys: c.t.keyed(key), body: body})
	c.mustReplayHeaders(first, retry, true)
	c.effects(before, 1, "a request and its retry")
}

func replayMarker(c *checker) {
	key, body := newKey(), c.t.Body()
	first, ok := c.first(key, body, nil)
	if !ok {
		return
	}
	if c.replayed(first) {
		c.failf("the first answer carries %s: true; only replays may", c.t.ReplayHeader)
	}
	retry := c.retry(req{note: "retry", keys: c.t.keyed(key), body: body})
	if c.answered(retry) && !c.replayed(retry) {
		c.failf("the retry's answer has no %s: true (it has %q)", c.t.ReplayHeader, retry.Header.Get(c.t.ReplayHeader))
	}
}

func mismatch422(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	key := newKey()
	if _, ok := c.first(key, c.t.Body(), nil); !ok {
		return
	}
	other := c.send(req{note: "same key, other body", keys: c.t.keyed(key), body: c.t.OtherBody()})
	if c.answered(other) && other.Status != http.StatusUnprocessableEntity {
		c.failf("the key reused with a different body answered %d, want 422", other.Status)
	}
	c.effects(before, 1, "a request and the key reused with another body")
}

func mismatchNotPoisoned(c *checker) {
	key, body := newKey(), c.t.Body()
	first, ok := c.first(key, body, nil)
	if !ok {
		return
	}
	c.send(req{note: "same key, other body", keys: c.t.keyed(key), body: c.t.OtherBody()})
	before, ok := c.count()
	if !ok {
		return
	}
	retry := c.retry(req{note: "retry of the first", keys: c.t.keyed(key), body: body})
	c.mustReplay(first, retry)
	c.effects(before, 0, "the first request retried after a 422")
}

func problemJSON(c *checker) {
	c.checkProblem(c.send(req{note: "no key", body: c.t.Body()}))
	c.checkProblem(c.send(req{note: "malformed key", keys: []string{`"abc`}, body: c.t.Body()}))
	key := newKey()
	if _, ok := c.first(key, c.t.Body(), nil); !ok {
		return
	}
	c.checkProblem(c.send(req{note: "same key, other body", keys: c.t.keyed(key), body: c.t.OtherBody()}))
}

// checkProblem fails the rule unless an error answer is an RFC 9457 problem.
// A success is not judged here (the rules of its status are).
func (c *checker) checkProblem(e Exchange) {
	if !c.answered(e) || e.Status < 400 {
		return
	}
	mt, _, err := mime.ParseMediaType(e.Header.Get("Content-Type"))
	if err != nil || mt != "application/problem+json" {
		c.failf("%s: the %d answer's Content-Type is %q, want application/problem+json", e.Note, e.Status, e.Header.Get("Content-Type"))
		return
	}
	var p map[string]any
	if err := json.Unmarshal(e.Body, &p); err != nil {
		c.failf("%s: the %d answer's body is not a JSON object: %v", e.Note, e.Status, err)
		return
	}
	if s, ok := p["status"]; ok {
		if f, isNum := s.(float64); !isNum || int(f) != e.Status {
			c.failf("%s: the problem's status member is %v, the answer's status %d", e.Note, s, e.Status)
		}
	}
}

// retryAttempts bounds how often retry resends after a 409.
const retryAttempts = 5

// retry sends r as a client that honours a 409 does: while the answer is a
// 409 (the first request's settle may still be under way, its answer
// having left first), it waits the Retry-After, at most MaxRetryAfter and
// at least 50 ms, and sends again, up to retryAttempts times. Every
// exchange is recorded; the last is returned.
func (c *checker) retry(r req) Exchange {
	e := c.send(r)
	for i := 1; i < retryAttempts && e.Err == "" && e.Status == http.StatusConflict; i++ {
		wait := c.t.MaxRetryAfter
		if s, err := strconv.Atoi(strings.TrimSpace(e.Header.Get("Retry-After"))); err == nil && s >= 0 {
			wait = min(wait, time.Duration(s)*time.Second)
		}
		wait = max(wait, 50*time.Millisecond)
		t := time.NewTimer(wait) // the real clock is the subject: a client waiting as told
		select {
		case <-c.ctx.Done():
			t.Stop()
			return e
		case <-t.C:
		}
		r.note = fmt.Sprintf("%s (again after a 409, attempt %d)", strings.SplitN(r.note, " (again", 2)[0], i+1)
		e = c.send(r)
	}
	return e
}
